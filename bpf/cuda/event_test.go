package cuda

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func TestEventUnmarshalHandEncoded(t *testing.T) {
	// pid 0x1234, tid 0x1235, sym 7 (cuLaunchKernel), flags 1,
	// start 1_000_000_000, duration 2_000_000, stream 0x5007; little-endian.
	b, _ := hex.DecodeString("34120000" + "35120000" + "07000000" + "01000000" +
		"00ca9a3b00000000" + "80841e0000000000" + "0750000000000000")
	var e Event
	if err := e.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	want := Event{PID: 0x1234, TID: 0x1235, Symbol: CuLaunchKernel, Start: 1e9, Duration: 2e6, Stream: 0x5007, HasStream: true}
	if e != want {
		t.Fatalf("got %+v\nwant %+v", e, want)
	}
	back, _ := e.MarshalBinary()
	if !bytes.Equal(back, b) {
		t.Fatalf("round trip %x != %x", back, b)
	}
	for name, bad := range map[string][]byte{
		"short":     b[:39],
		"long":      append(append([]byte{}, b...), 0),
		"symbol 0":  patch(b, 8, 0),
		"symbol 10": patch(b, 8, 10),
		"flags 2":   patch(b, 12, 2),
	} {
		if err := new(Event).UnmarshalBinary(bad); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

func patch(b []byte, off int, v byte) []byte {
	c := append([]byte{}, b...)
	c[off] = v
	return c
}

func TestSymbols(t *testing.T) {
	names := DefaultSymbols()
	if len(names) != 9 || names[0] != "cudaLaunchKernel" || names[8] != "cuStreamSynchronize" {
		t.Fatalf("DefaultSymbols = %v", names)
	}
	for _, n := range names {
		s, err := ParseSymbol(n)
		if err != nil || s.String() != n {
			t.Fatalf("ParseSymbol(%q) = %v, %v", n, s, err)
		}
	}
	// Cookies: symbol in bits 0..7, stream slot in bits 8..15. The slots
	// follow the x86-64 ABI by hand: cudaLaunchKernel(func, dim3 grid
	// (2 regs), dim3 block (2 regs), args, sharedMem, stream) puts stream
	// in slot 8 = second stack argument; cuLaunchKernel's hStream is the
	// 9th integer argument = third stack argument.
	for s, want := range map[Symbol]uint64{
		CudaLaunchKernel:      0x0801,
		CudaGraphLaunch:       0x0202,
		CudaStreamSynchronize: 0x0103,
		CudaDeviceSynchronize: 0x0004,
		CudaMemcpy:            0x0005,
		CudaMemcpyAsync:       0x0506,
		CuLaunchKernel:        0x0907,
		CuGraphLaunch:         0x0208,
		CuStreamSynchronize:   0x0109,
	} {
		if got := cookie(s); got != want {
			t.Errorf("cookie(%s) = %#x, want %#x", s, got, want)
		}
	}
	if _, err := ParseSymbol("cudaMalloc"); err == nil {
		t.Fatal("cudaMalloc accepted")
	}
	if Symbol(0).String() != "Symbol(0)" || Symbol(0).HasStream() || Symbol(200).HasStream() {
		t.Fatal("invalid symbols")
	}
	if got, err := resolveSymbols([]string{"cudaMemcpy", "cudaMemcpy", "cuLaunchKernel"}); err != nil || len(got) != 2 {
		t.Fatalf("resolveSymbols dedup: %v %v", got, err)
	}
}

func TestIsCUDALibrary(t *testing.T) {
	for p, want := range map[string]bool{
		"/usr/local/cuda/lib64/libcudart.so.12.4.127": true,
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1":      true,
		"/usr/lib/x86_64-linux-gnu/libcuda.so":        true,
		"/opt/conda/lib/libcudart.so.11.0":            true,
		"/usr/lib/libcudnn.so.8":                      false,
		"/usr/lib/libcublas.so.12":                    false,
		"/usr/lib/libcudart_static.a":                 false,
		"/home/me/libcuda.sox":                        false,
	} {
		if got := IsCUDALibrary(p); got != want {
			t.Errorf("IsCUDALibrary(%q) = %v", p, got)
		}
	}
}

func FuzzEventUnmarshal(f *testing.F) {
	seed, _ := (&Event{PID: 1, TID: 2, Symbol: CudaMemcpyAsync, Start: 3, Duration: 4, Stream: 5, HasStream: true}).MarshalBinary()
	f.Add(seed)
	f.Add(make([]byte, EventSize))
	f.Add([]byte{1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Event
		if err := e.UnmarshalBinary(b); err != nil {
			return
		}
		back, _ := e.MarshalBinary()
		if !bytes.Equal(back, b) {
			t.Fatalf("round trip %x -> %+v -> %x", b, e, back)
		}
	})
}
