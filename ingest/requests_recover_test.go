package ingest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/internal/diskfull"
	"github.com/tailroot/tailroot/tsdb/records"
)

// TestRecordsRecoverAfterDiskFull fills the disk of the record store,
// checks that pushes are refused (and Ready says why) while it is full,
// that the pipeline accepts pushes again by itself once space is back, and
// that after a crash every acknowledged request is stored once, none of a
// refused push is, and the derived count equals the stored records.
func TestRecordsRecoverAfterDiskFull(t *testing.T) {
	db := openTestDB(t)
	dir := diskfull.Mount(t, 8<<20)
	o := testRecordsOptions(dir)
	o.RecoverInterval = 10 * time.Millisecond
	p, err := NewRecords(db, nil, o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls := labels.FromStrings("model_name", "m")
	acked, refused := map[string]bool{}, map[string]bool{}
	n := 0
	push := func(size int) error {
		items := make([]Item, size)
		ids := make([]string, size)
		for i := range items {
			n++
			ids[i] = fmt.Sprintf("r%d", n)
			items[i] = testItem(t, testNow+int64(n), ids[i], ls, [records.NumStages]float64{0.1, 0.2, 0.3})
		}
		err := p.Append(context.Background(), "test", items)
		for _, id := range ids {
			if err == nil {
				acked[id] = true
			} else {
				refused[id] = true
			}
		}
		return err
	}
	for range 20 {
		if err := push(50); err != nil {
			t.Fatal(err)
		}
	}
	ballast, err := diskfull.Fill(dir)
	if err != nil {
		t.Fatal(err)
	}
	var failErr error
	for i := 0; i < 1000 && failErr == nil; i++ {
		failErr = push(200)
	}
	if !errors.Is(failErr, ErrRecordsFailed) {
		t.Fatalf("pushes to a full disk: got %v, want ErrRecordsFailed", failErr)
	}
	if p.Ready() == nil {
		t.Fatal("Ready is nil while pushes are refused")
	}
	time.Sleep(50 * time.Millisecond)
	if err := push(10); !errors.Is(err, ErrRecordsFailed) {
		t.Fatalf("push while the disk is still full: got %v, want ErrRecordsFailed", err)
	}
	if err := ballast.Free(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Ready() != nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := p.Ready(); err != nil {
		t.Fatalf("pipeline not recovered 5 s after the disk was freed: %v", err)
	}
	for range 20 {
		if err := push(50); err != nil {
			t.Fatalf("push after recovery: %v", err)
		}
	}
	crash(t, p)

	p = openTestRecords(t, db, o)
	seen := map[string]int{}
	for _, r := range selectAllRecords(t, p.Store()) {
		seen[r.RequestID]++
	}
	lost, twice, present := 0, 0, 0
	for id := range acked {
		switch seen[id] {
		case 0:
			lost++
		case 1:
		default:
			twice++
		}
	}
	for id := range refused {
		if seen[id] > 0 {
			present++
		}
	}
	if lost+twice+present > 0 {
		t.Fatalf("%d of %d acknowledged requests lost, %d stored twice, %d of %d refused requests stored", lost, len(acked), twice, present, len(refused))
	}
	var tail float64
	for _, s := range lastSamples(t, db, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, SeriesTailRequests)) {
		tail += s.f
	}
	if int(tail) != len(acked) {
		t.Fatalf("derived tail count %v, want the %d stored requests", tail, len(acked))
	}
	t.Logf("%d acknowledged, %d refused (ballast %d bytes)", len(acked), len(refused), ballast.Size())
}
