package collect

import (
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

func TestBatchMergesAndLabels(t *testing.T) {
	b := NewBatch(labels.FromStrings("node", "n1", "cluster", "c"))
	a := labels.FromStrings("__name__", "a", "x", "1")
	own := labels.FromStrings("__name__", "b", "node", "other")
	b.Add([]Series{
		{Labels: a, Samples: []Sample{{T: 20, V: 2}}},
		{Labels: own, Samples: []Sample{{T: 5, V: 1}}},
		{Labels: labels.FromStrings("__name__", "empty")},
	})
	b.Add([]Series{{Labels: a, Samples: []Sample{{T: 10, V: 1}, {T: 30, V: 3}}}})
	if b.Samples() != 4 {
		t.Fatalf("%d samples, want 4", b.Samples())
	}
	ss := b.Series()
	if len(ss) != 2 {
		t.Fatalf("%d series, want 2 (a merged, empty left out)", len(ss))
	}
	wantA := labels.FromStrings("__name__", "a", "x", "1", "node", "n1", "cluster", "c")
	if !labels.Equal(ss[0].Labels, wantA) {
		t.Errorf("labels %s, want %s", ss[0].Labels, wantA)
	}
	if got := ss[0].Samples; len(got) != 3 || got[0].T != 10 || got[1].T != 20 || got[2].T != 30 {
		t.Errorf("samples not merged in time order: %+v", got)
	}
	// A series' own label wins over an external one.
	if ss[1].Labels.Get("node") != "other" || ss[1].Labels.Get("cluster") != "c" {
		t.Errorf("labels %s", ss[1].Labels)
	}
	b.Reset()
	if b.Samples() != 0 || len(b.Series()) != 0 {
		t.Fatal("Reset left data")
	}
}
