package kernel

import (
	"math"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/agent/procinfo"
	"github.com/tailroot/tailroot/bpf"
)

func TestSyscallName(t *testing.T) {
	for nr, want := range map[uint32]string{0: "read", 1: "write", 35: "nanosleep", 39: "getpid", 202: "futex", 9999: "sys_9999"} {
		if got := SyscallName(nr); got != want {
			t.Errorf("SyscallName(%d) = %q, want %q", nr, got, want)
		}
	}
}

func TestCgroupLabels(t *testing.T) {
	const id = "4b825dc642cb6eb9a060e54bf8d69288fbee4904c6a4d1d4f24e2d5f6e4a5b9c"
	path := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b1f2c3d_1111_2222_3333_444455556666.slice/cri-containerd-" + id + ".scope"
	got := CgroupLabels(path)
	want := labels.FromStrings("cgroup", path, "container_id", id, "pod_uid", "6b1f2c3d-1111-2222-3333-444455556666")
	if !labels.Equal(got, want) {
		t.Errorf("got %s, want %s", got, want)
	}
	if got := CgroupLabels("/system.slice/sshd.service"); !labels.Equal(got, labels.FromStrings("cgroup", "/system.slice/sshd.service")) {
		t.Errorf("plain cgroup: %s", got)
	}
}

// TestHistSeries checks the conversion by hand: slot s >= 1 holds
// (2^(s-31), 2^(s-30)] s, i.e. native schema-0 bucket s-30. Three
// observations in slot 21 (bucket -9: (1/1024, 1/512] s) and one in slot 23
// (bucket -7); Native starts a new span after an empty bucket, so the spans
// are {offset -9, length 1} and {offset 1, length 1} (bucket -8 skipped)
// with counts 3 and 1, delta-encoded as 3, -2.
func TestHistSeries(t *testing.T) {
	var h bpf.Hist
	if _, ok := HistSeries("x", labels.EmptyLabels(), metaHist("h"), &h, 1); ok {
		t.Fatal("empty histogram emitted")
	}
	h.Slots[21], h.Slots[23] = 3, 1
	h.SumNs = 7_000_000 // 7 ms
	s, ok := HistSeries(MetricOffCPU, labels.FromStrings("pid", "1"), metaHist("h"), &h, 1234)
	if !ok {
		t.Fatal("not emitted")
	}
	nh := s.Histograms[0].H
	if s.Histograms[0].T != 1234 || nh.Count != 4 || math.Abs(nh.Sum-0.007) > 1e-12 || nh.Schema != 0 {
		t.Fatalf("histogram %v", nh)
	}
	sp := nh.PositiveSpans
	if len(sp) != 2 || sp[0].Offset != -9 || sp[0].Length != 1 || sp[1].Offset != 1 || sp[1].Length != 1 {
		t.Fatalf("spans %+v", sp)
	}
	if d := nh.PositiveBuckets; len(d) != 2 || d[0] != 3 || d[1] != -2 {
		t.Fatalf("buckets %v", d)
	}
	if s.Labels.Get(model.MetricNameLabel) != MetricOffCPU || s.Meta.Type != model.MetricTypeHistogram || s.Meta.Unit != "seconds" {
		t.Fatalf("series %s %+v", s.Labels, s.Meta)
	}
}

func TestProcLabels(t *testing.T) {
	in := procinfo.Info{PID: 42, Comm: "python3"}
	in.Container.ID = "abc"
	got := procLabels(in)
	if !labels.Equal(got, labels.FromStrings("pid", "42", "comm", "python3", "container_id", "abc")) {
		t.Fatalf("got %s", got)
	}
}

func TestOpenNothing(t *testing.T) {
	c, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Status()) != 0 {
		t.Fatalf("status %+v", c.Status())
	}
}
