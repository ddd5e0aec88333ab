package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tailroot/tailroot/ingest"
	"github.com/tailroot/tailroot/tsdb"
	"github.com/tailroot/tailroot/tsdb/records"
)

// importServer is the records pipeline behind the real push and query
// handlers, as serve wires them.
func importServer(t testing.TB) (*httptest.Server, *ingest.Records, *tsdb.DB) {
	t.Helper()
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	o.NoLockfile = true
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ro := ingest.DefaultRecordsOptions()
	ro.Store.Dir = t.TempDir()
	ro.DeriveInterval = 5 * time.Second // serve's default
	p, err := ingest.NewRecords(db, db.Metadata, ro, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	r := mux.NewRouter()
	p.Register(r)
	r.Handle("/api/v1/write", ingest.NewRemoteWrite(db, db.Metadata, ingest.DefaultOptions(), nil, nil))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv, p, db
}

func writeFile(t testing.TB, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func storedByID(t testing.TB, p *ingest.Records) map[string]records.Record {
	t.Helper()
	it := p.Store().Select(context.Background(), math.MinInt64, math.MaxInt64)
	defer it.Close()
	out := map[string]records.Record{}
	for it.Next() {
		r := it.At()
		if _, dup := out[r.RequestID]; dup {
			t.Errorf("request %q stored twice", r.RequestID)
		}
		out[r.RequestID] = r
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return out
}

// TestImportFormats imports one file of each format, then again: the
// first run stores every good record once and names each bad one with its
// file and line, the rerun stores nothing.
func TestImportFormats(t *testing.T) {
	srv, p, _ := importServer(t)
	dir := t.TempDir()
	t0 := time.Now().Add(-10 * time.Minute).Unix()
	nd := writeFile(t, dir, "reqs.ndjson", fmt.Sprintf(`{"request_id":"n1","labels":{"model_name":"m"},"arrival":%d.5,"scheduled":%d.6,"first_token":%d.8,"last_token":%d.9}
{"request_id":"n2","arrival":%d,"finished":%d.25}

{"request_id":"n3","arrival":%d,"finished":%d}
not json
{"request_id":"n1","arrival":%d.5,"finished":%d.9}
`, t0, t0, t0, t0, t0, t0, t0, t0-1, t0, t0))
	cs := writeFile(t, dir, "reqs.csv", fmt.Sprintf(`request_id,arrival,finished,stages.queue,model_name,itl
c1,%d.0,%d.5,0.2,m,
c2,%d.0,%d.75,0.1,m,0.01;0.02
c3,%d.0,%d.5,abc,m,
`, t0, t0, t0, t0, t0, t0))
	date := time.Unix(t0, 0).UTC().Format("20060102-150405")
	vb := writeFile(t, dir, "bench.json", fmt.Sprintf(`{"date":%q,"backend":"vllm","model_id":"meta-llama/Llama-3.1-8B","duration":4,
"input_lens":[10,20,30,40],"output_lens":[3,2,0,2],"ttfts":[0.1,0.2,0,0.3],"itls":[[0.01,0.02],[0.05],[],[0.04]],
"errors":["","","","timeout"]}`, date))

	run := func(chunk int) (importSummary, string) {
		t.Helper()
		var out bytes.Buffer
		im := &importer{server: srv.URL, batch: 2, chunk: chunk, dedup: true, client: srv.Client(), out: &out, bar: newProgressBar(io.Discard, false)}
		for _, f := range []struct{ path, format string }{{nd, "ndjson"}, {cs, "csv"}, {vb, "vllm-bench"}} {
			if err := im.load(f.path, f.format); err != nil {
				t.Fatal(err)
			}
		}
		sum, err := im.run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		sum.print(&out)
		return sum, out.String()
	}
	// Streamed in chunks of 2 records: the repeat of n1 four lines later
	// is found on the server, not in memory.
	sum, out := run(2)
	// Good: n1, n2, c1, c2, requests 0 and 1 of the benchmark. Bad: line 4
	// of the NDJSON (finished before arrival), line 5 (not JSON), CSV line 4
	// (stage not a number), benchmark requests 2 (no output) and 3 (error).
	// Line 6 repeats n1 and is skipped.
	if sum.Accepted != 6 || sum.Rejected != 5 || sum.Skipped != 1 {
		t.Errorf("first run: %+v\n%s", sum, out)
	}
	for _, want := range []string{"reqs.ndjson:4:", "reqs.ndjson:5:", "reqs.csv:4:", "bench.json:3:", "bench.json:4: request 3: the benchmark recorded an error: timeout"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	got := storedByID(t, p)
	if len(got) != 6 {
		t.Fatalf("%d records stored, want 6: %v", len(got), got)
	}
	check := func(id string, e2e float64, stage records.Stage, v float64) {
		t.Helper()
		r, ok := got[id]
		if !ok {
			t.Errorf("%s not stored", id)
			return
		}
		if math.Abs(r.E2E-e2e) > 1e-6 || math.Abs(r.Stages[stage]-v) > 1e-6 {
			t.Errorf("%s: e2e %v, %s %v; want %v and %v", id, r.E2E, stage, r.Stages[stage], e2e, v)
		}
	}
	check("n1", 0.4, records.StagePrefill, 0.2) // scheduled .6 → first token .8
	check("n2", 0.25, records.StageQueue, 0)
	check("c1", 0.5, records.StageQueue, 0.2)
	check("c2", 0.75, records.StageQueue, 0.1)
	// Benchmark request 0: TTFT 0.1 s, then 0.01 + 0.02 s of decode.
	check(fmt.Sprintf("vllm-bench:%s:0", date), 0.13, records.StageDecode, 0.03)
	check(fmt.Sprintf("vllm-bench:%s:1", date), 0.25, records.StageDecode, 0.05)
	if r := got[fmt.Sprintf("vllm-bench:%s:1", date)]; r.Labels.Get("model_name") != "meta-llama/Llama-3.1-8B" || r.PromptTokens != 20 || r.OutputTokens != 2 {
		t.Errorf("benchmark request 1: labels %v, tokens %d/%d", r.Labels, r.PromptTokens, r.OutputTokens)
	}
	// Request 1 arrives a quarter of the 4 s run after request 0, which
	// arrives at the end date − duration.
	if r := got[fmt.Sprintf("vllm-bench:%s:1", date)]; r.Time != (t0-4+1)*1000 {
		t.Errorf("benchmark request 1 at %d ms, want %d", r.Time, (t0-3)*1000)
	}

	sum, out = run(0)
	if sum.Accepted != 0 || sum.Skipped != 7 {
		t.Errorf("rerun: %+v\n%s", sum, out)
	}
	if n := len(storedByID(t, p)); n != 6 {
		t.Errorf("%d records after the rerun, want 6", n)
	}
}

// TestImportCommandFlags runs the command itself: the progress bar on
// stderr is off for a pipe, and a bad flag is refused.
func TestImportCommandFlags(t *testing.T) {
	if err := importCommand([]string{"--progress", "sometimes", "x.ndjson"}); err == nil || !strings.Contains(err.Error(), "--progress") {
		t.Errorf("bad --progress: %v", err)
	}
	if err := importCommand([]string{"x.txt"}); err == nil || !strings.Contains(err.Error(), "--format") {
		t.Errorf("unknown extension: %v", err)
	}
	// The bar follows the input bytes read (the record count of a
	// streamed input is not known in advance).
	var buf bytes.Buffer
	var read atomic.Int64
	bar := newProgressBar(&buf, true)
	bar.start(400, &read)
	read.Store(200)
	bar.set(2, 2) // within 100 ms of the start: not redrawn
	bar.last = time.Time{}
	bar.set(2, 2)
	read.Store(400)
	bar.set(4, 4) // within 100 ms again: drawn by done
	bar.done()
	if s := buf.String(); strings.Count(s, "\r") != 3 || !strings.Contains(s, "[###############---------------]  50%  2 records sent") || !strings.Contains(s, "[##############################] 100%  4 records sent") {
		t.Errorf("progress bar %q", s)
	}
}

// TestImportOpenMetrics imports series samples twice: the rerun is
// accepted and stores no sample twice; a sample without a timestamp is
// rejected by name.
func TestImportOpenMetrics(t *testing.T) {
	srv, _, db := importServer(t)
	t0 := time.Now().Add(-10 * time.Minute).Unix()
	path := writeFile(t, t.TempDir(), "dump.om", fmt.Sprintf(`# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3 %d.000
vllm:num_requests_running{model_name="m"} 4 %d.000
vllm:num_requests_running{model_name="n"} 1 %d.500
vllm:num_requests_running{model_name="o"} 9
# TYPE vllm:request_success counter
vllm:request_success_total{model_name="m"} 10 %d.000
vllm:request_success_total{model_name="m"} 12 %d.000
# EOF
`, t0, t0+15, t0, t0, t0+15))
	for run := range 2 {
		im := &importer{server: srv.URL, batch: 100, dedup: true, client: srv.Client(), out: io.Discard, bar: newProgressBar(io.Discard, false)}
		if err := im.load(path, "openmetrics"); err != nil {
			t.Fatal(err)
		}
		sum, err := im.run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		sum.print(&out)
		if sum.SamplesAccepted != 5 || sum.SamplesRejected != 0 || sum.Rejected != 1 || !strings.Contains(out.String(), `sample 4 {__name__="vllm:num_requests_running", model_name="o"}: no timestamp`) {
			t.Errorf("run %d: %+v\n%s", run, sum, out.String())
		}
	}
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", "vllm:.*"))
	got := map[string][]string{}
	var it chunkenc.Iterator
	for ss.Next() {
		it = ss.At().Iterator(it)
		for it.Next() != chunkenc.ValNone {
			ts, v := it.At()
			got[ss.At().Labels().String()] = append(got[ss.At().Labels().String()], fmt.Sprintf("%d=%g", ts-t0*1000, v))
		}
	}
	want := map[string][]string{
		`{__name__="vllm:num_requests_running", model_name="m"}`:  {"0=3", "15000=4"},
		`{__name__="vllm:num_requests_running", model_name="n"}`:  {"500=1"},
		`{__name__="vllm:request_success_total", model_name="m"}`: {"0=10", "15000=12"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stored %v, want %v", got, want)
	}
}
