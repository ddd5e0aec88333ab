package api

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/ingest"
	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/tailfn"
	"github.com/tailroot/tailroot/tsdb"
	"github.com/tailroot/tailroot/tsdb/records"
)

// TestBreakdownFromBackfilledSeries is the reported failure end to end:
// 2,000 requests backfilled in one push go through the records pipeline
// into the TSDB's derived series; a server without the records (as after
// records retention) answers /breakdown from those series alone. It used
// to answer 422 "no requests in window"; now it sees all 2,000 requests
// and its per-stage bounds hold the exact answer computed from the
// requests themselves.
func TestBreakdownFromBackfilledSeries(t *testing.T) {
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	o.NoLockfile = true
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ro := ingest.DefaultRecordsOptions()
	ro.Store.Dir = t.TempDir()
	p, err := ingest.NewRecords(db, db.Metadata, ro, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	r := rand.New(rand.NewPCG(21, 22))
	now := time.Now()
	from := now.Add(-20 * time.Minute).UnixMilli()
	items := make([]ingest.Item, 2000)
	cols := make([][]float64, records.NumStages)
	for i := range items {
		a := float64(from+r.Int64N(15*60_000)) / 1000
		q := r.ExpFloat64() * 0.05
		if r.IntN(40) == 0 {
			q += r.ExpFloat64() * 3
		}
		pf := math.Exp(r.NormFloat64()*0.5 - 2)
		dc := math.Exp(r.NormFloat64()*0.7 - 0.5)
		line := fmt.Sprintf(`{"request_id":"q%d","labels":{"model_name":"llama"},"arrival":%.6f,"scheduled":%.6f,"first_token":%.6f,"last_token":%.6f}`, i, a, a+q, a+q+pf, a+q+pf+dc)
		if items[i], err = ingest.DecodeRequestLine([]byte(line), ingest.RequestLimits{}); err != nil {
			t.Fatal(err)
		}
		for j := range cols {
			cols[j] = append(cols[j], items[i].Record.Stages[j])
		}
	}
	if err := p.Append(context.Background(), "test", items); err != nil {
		t.Fatal(err)
	}
	names := make([]string, records.NumStages)
	for j := range names {
		names[j] = records.Stage(j).String()
	}
	reqs, err := attribution.NewRequests(names, cols)
	if err != nil {
		t.Fatal(err)
	}
	exact, err := attribution.TailMean(reqs, 0.99)
	if err != nil {
		t.Fatal(err)
	}

	reg := query.NewRegistry()
	if err := tailfn.Register(reg, nil); err != nil {
		t.Fatal(err)
	}
	ng, err := query.New(query.DefaultOptions(), reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	rt := mux.NewRouter()
	NewAttribution(ng, db, nil, AttributionOptions{}).Register(rt)
	srv := httptest.NewServer(rt)
	defer srv.Close()
	e := &attributionEnv{srv: srv}
	code, env, body := e.get(t, "/api/v1/attribution/breakdown", url.Values{
		"selector": {`{model_name="llama"}`}, "start": {fmt.Sprint(now.Add(-30 * time.Minute).Unix())}, "end": {fmt.Sprint(now.Add(time.Minute).Unix())},
		"quantile": {"0.99"}, "method": {"auto"},
	})
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	d := env["data"].(map[string]any)
	if d["method"] != "tail_mean_accumulators" || d["kind"] != "estimate" || d["requests"] != 2000.0 {
		t.Errorf("method %v kind %v requests %v, want tail_mean_accumulators, estimate, 2000", d["method"], d["kind"], d["requests"])
	}
	for _, s := range d["stages"].([]any) {
		row := s.(map[string]any)
		j := -1
		for k, n := range names {
			if n == row["stage"] {
				j = k
			}
		}
		lo, hi := row["lower_seconds"].(float64), row["upper_seconds"].(float64)
		if x := exact.Contrib[j]; j < 0 || x < lo-1e-9 || x > hi+1e-9 {
			t.Errorf("stage %v: records %v outside [%v, %v] from series", row["stage"], exact.Contrib[j], lo, hi)
		}
	}
	t.Logf("tail mean: records %.4f, series %v", exact.Target, d["target_seconds"])
}
