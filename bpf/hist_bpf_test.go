package bpf

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/tailroot/tailroot/bpf/internal/testutil"
)

// TestHistSlotInKernel runs include/hist.h in the kernel (BPF_PROG_TEST_RUN
// of testdata/slot.bpf.c) and compares every slot with the Go reference,
// then checks the histogram hist_add built against one built in Go.
func TestHistSlotInKernel(t *testing.T) {
	testutil.RequireRoot(t)
	var objs slotTestObjects
	if err := loadSlotTestObjects(&objs, nil); err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer objs.Close()

	values := []uint64{
		0, 1, 2, 3, 953, 954, 976562, 976563, 1953125, 1953126,
		500_000_000, 500_000_001, 1e9, 1e9 + 1, 8_589_934_592_000_000_000, math.MaxUint64,
	}
	for j := -9; j <= 33; j++ {
		b := uint64(math.Ldexp(1e9, j))
		values = append(values, b-1, b, b+1)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		values = append(values, r.Uint64()>>r.UintN(64))
	}
	var want Hist
	for _, v := range values {
		ret, err := objs.SlotOf.Run(&ebpf.RunOptions{Context: []uint64{v}})
		if err != nil {
			t.Fatalf("test run: %v", err)
		}
		if int(ret) != Slot(v) {
			t.Fatalf("kernel hist_slot(%d) = %d, Go Slot = %d", v, ret, Slot(v))
		}
		want.Slots[Slot(v)]++
		want.SumNs += v // wraps like the kernel's u64 add
	}
	var got Hist
	if err := objs.TestHist.Lookup(uint32(0), &got); err != nil {
		t.Fatalf("lookup: %v", err)
	}
	if got != want {
		t.Fatalf("kernel histogram differs:\n got %+v\nwant %+v", got, want)
	}
}
