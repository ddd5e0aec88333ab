package bpf

import (
	"bytes"
	"slices"
	"testing"
)

// TestSlowEventLayout decodes bytes written out by hand from the field
// offsets of struct slow_event in include/slow.h.
func TestSlowEventLayout(t *testing.T) {
	b := []byte{
		0x39, 0x30, 0, 0, // pid 12345
		0x3a, 0x30, 0, 0, // tid 12346
		0x00, 0xca, 0x9a, 0x3b, 0, 0, 0, 0, // start 1e9 ns
		0x80, 0xf0, 0xfa, 0x02, 0, 0, 0, 0, // duration 50e6 ns
		7, 0, 0, 0, // user stack id 7
		0xff, 0xff, 0xff, 0xff, // kernel stack -1 (NoStack)
		3, 0, 0, 0, // kind SLOW_SYSCALL
		35, 0, 0, 0, // detail: nanosleep on x86-64
		's', 'l', 'o', 'w', 'p', 'a', 't', 'h', 0, 'x', 'x', 0, 0, 0, 0, 0, // comm, garbage after the NUL
	}
	var e SlowEvent
	if err := e.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	want := SlowEvent{PID: 12345, TID: 12346, Start: 1e9, Duration: 50e6, UserStack: 7, KernelStack: NoStack, Kind: SlowSyscall, Detail: 35, Comm: "slowpath"}
	if e != want {
		t.Fatalf("decoded %+v\nwant    %+v", e, want)
	}
	if e.Kind.String() != "syscalls" || SlowOffCPU.String() != "offcpu" || SlowRunQueue.String() != "runqueue" || SlowKind(9).String() != "SlowKind(9)" {
		t.Fatal("kind names")
	}
	for _, bad := range [][]byte{b[:55], append(slices.Clone(b), 0)} {
		if err := e.UnmarshalBinary(bad); err == nil {
			t.Errorf("%d bytes accepted", len(bad))
		}
	}
	b[32] = 0
	if err := e.UnmarshalBinary(b); err == nil {
		t.Error("kind 0 accepted")
	}
}

func TestTrimStack(t *testing.T) {
	for _, c := range []struct{ in, want []uint64 }{
		{[]uint64{1, 2, 0, 0}, []uint64{1, 2}},
		{[]uint64{0, 5}, []uint64{}},
		{[]uint64{1, 2, 3}, []uint64{1, 2, 3}},
		{nil, nil},
	} {
		if got := TrimStack(c.in); !slices.Equal(got, c.want) {
			t.Errorf("TrimStack(%x) = %x, want %x", c.in, got, c.want)
		}
	}
}

func FuzzSlowEventUnmarshal(f *testing.F) {
	seed, _ := (&SlowEvent{PID: 1, TID: 2, Kind: SlowOffCPU, Start: 3, Duration: 4, UserStack: 5, KernelStack: -14, Comm: "python3"}).MarshalBinary()
	f.Add(seed)
	f.Add(make([]byte, SlowEventSize))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var e SlowEvent
		if err := e.UnmarshalBinary(b); err != nil {
			return
		}
		back, _ := e.MarshalBinary()
		// Bytes after the first NUL of comm (and its 16th byte, always NUL
		// in the kernel) are not kept; everything else is.
		i := bytes.IndexByte(b[40:56], 0)
		if i < 0 {
			i = 15
		}
		if !bytes.Equal(back[:40+i], b[:40+i]) {
			t.Fatalf("round trip changed bytes:\n%x\n%x", b, back)
		}
		var again SlowEvent
		if err := again.UnmarshalBinary(back); err != nil || (again != e && len(e.Comm) <= 15) {
			t.Fatalf("re-decode: %v %+v vs %+v", err, again, e)
		}
	})
}
