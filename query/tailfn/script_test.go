package tailfn

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/tsdb/records"
)

// The .test files are scripts in a small language modelled on promqltest:
//
//	load requests                       request records, one per line:
//	    t=<dur> {labels} queue=.. prefill=.. decode=.. [other=..] [e2e=..] [ttft=..] [n=<copies>]
//	load <interval>                     series, promqltest syntax (every
//	    <series> <values>               such block goes to one storage)
//	eval instant at <dur> <expr>        then, indented, any of:
//	    {labels} <value>                an expected row
//	    tolerance <x>                   |got − want| ≤ x·max(1, |want|) (default 1e-9)
//	    partial                         other rows may be present
//	    error <substring>               evaluation must fail with this text
//	    warning <substring>             an annotation must contain this text
//
// Stages not named are 0; e2e defaults to the stage sum, and when given
// without other, other is filled as the residual. Records have t as their
// time; queries run at "eval … at <dur>" from the Unix epoch.
//
//go:embed testdata/*.test
var scripts embed.FS

func TestScripts(t *testing.T) {
	files, err := fs.Glob(scripts, "testdata/*.test")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(path.Base(f), ".test"), func(t *testing.T) {
			b, err := scripts.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			runScript(t, string(b))
		})
	}
}

type evalCmd struct {
	line     int
	at       time.Duration
	expr     string
	want     map[string]float64
	order    []string
	tol      float64
	partial  bool
	errText  string
	warnings []string
}

// runScript executes one script against a real records.Store and the
// tailroot engine with the functions registered.
func runScript(t *testing.T, src string) {
	t.Helper()
	store := openStore(t)
	var series strings.Builder
	var evals []*evalCmd
	lines := strings.Split(src, "\n")
	indented := func(s string) bool { return s != "" && (s[0] == ' ' || s[0] == '\t') }
	for i := 0; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], " \t\r")
		trim := strings.TrimSpace(l)
		if trim == "" || strings.HasPrefix(trim, "#") {
			continue
		}
		if indented(l) {
			t.Fatalf("line %d: indented line outside a block: %q", i+1, l)
		}
		var body []string
		var bodyLines []int
		for i+1 < len(lines) {
			n := strings.TrimRight(lines[i+1], " \t\r")
			nt := strings.TrimSpace(n)
			if nt != "" && !indented(n) {
				break
			}
			i++
			if nt != "" && !strings.HasPrefix(nt, "#") {
				body = append(body, nt)
				bodyLines = append(bodyLines, i+1)
			}
		}
		switch {
		case trim == "load requests":
			if len(evals) > 0 {
				t.Fatalf("line %d: loads must come before the first eval", i+1)
			}
			var recs []records.Record
			for k, b := range body {
				rs, err := parseRecordLine(b)
				if err != nil {
					t.Fatalf("line %d: %v", bodyLines[k], err)
				}
				recs = append(recs, rs...)
			}
			if err := store.Append(recs); err != nil {
				t.Fatalf("line %d: append records: %v", i+1, err)
			}
		case strings.HasPrefix(trim, "load "):
			if len(evals) > 0 {
				t.Fatalf("line %d: series loads must come before the first eval", i+1)
			}
			series.WriteString("\n" + trim + "\n")
			for _, b := range body {
				series.WriteString("\t" + b + "\n")
			}
		case strings.HasPrefix(trim, "eval instant at "):
			ev, err := parseEval(strings.TrimPrefix(trim, "eval instant at "), body)
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			ev.line = i + 1
			evals = append(evals, ev)
		default:
			t.Fatalf("line %d: unknown command %q", i+1, trim)
		}
	}
	st := promqltest.LoadedStorage(t, series.String())
	ng := newEngine(t, store)
	for _, ev := range evals {
		runEval(t, ng, st, ev)
	}
}

func openStore(t testing.TB) *records.Store {
	t.Helper()
	opts := records.DefaultOptions()
	opts.Dir = t.TempDir()
	s, err := records.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newEngine(t testing.TB, src RecordSource) *query.Engine {
	t.Helper()
	reg := query.NewRegistry()
	if err := Register(reg, src); err != nil {
		t.Fatal(err)
	}
	ng, err := query.New(query.DefaultOptions(), reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ng.Close() })
	return ng
}

// parseRecordLine parses `t=<dur> {labels} stage=v … [e2e=v] [ttft=v] [n=k]`.
func parseRecordLine(s string) ([]records.Record, error) {
	open := strings.IndexByte(s, '{')
	if open < 0 {
		return nil, fmt.Errorf("record %q: no {labels}", s)
	}
	close := labelsEnd(s, open)
	if close < 0 {
		return nil, fmt.Errorf("record %q: unterminated {labels}", s)
	}
	ls, err := parser.NewParser(parser.Options{}).ParseMetric(s[open : close+1])
	if err != nil {
		return nil, fmt.Errorf("record labels: %w", err)
	}
	r := records.Record{Labels: ls}
	fields := append(strings.Fields(s[:open]), strings.Fields(s[close+1:])...)
	copies, haveE2E, haveOther, haveT := 1, false, false, false
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("record field %q: want key=value", f)
		}
		switch k {
		case "t":
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, fmt.Errorf("record time %q: %w", v, err)
			}
			r.Time, haveT = d.Milliseconds(), true
			continue
		case "n":
			if copies, err = strconv.Atoi(v); err != nil || copies < 1 || copies > 100_000 {
				return nil, fmt.Errorf("record copies %q: want an integer in [1, 100000]", v)
			}
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("record field %s=%q: not a number", k, v)
		}
		switch k {
		case "e2e":
			r.E2E, haveE2E = x, true
		case "ttft":
			r.TTFT = x
		default:
			j := -1
			for s := range records.Stage(records.NumStages) {
				if s.String() == k {
					j = int(s)
				}
			}
			if j < 0 {
				return nil, fmt.Errorf("record field %q: not a stage, e2e, ttft, t or n", k)
			}
			r.Stages[j] = x
			haveOther = haveOther || j == int(records.StageOther)
		}
	}
	if !haveT {
		return nil, fmt.Errorf("record %q: no t=", s)
	}
	switch {
	case haveE2E && !haveOther:
		if err := r.FillOther(); err != nil {
			return nil, err
		}
	case !haveE2E:
		r.E2E = r.Sum()
	}
	out := make([]records.Record, copies)
	for i := range out {
		out[i] = r
		out[i].RequestID = fmt.Sprintf("r%d-%d", r.Time, i)
	}
	return out, nil
}

// labelsEnd returns the index of the } closing the { at open, skipping
// quoted strings, or −1.
func labelsEnd(s string, open int) int {
	inQuote := false
	for i := open + 1; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '}':
			return i
		}
	}
	return -1
}

func parseEval(head string, body []string) (*evalCmd, error) {
	at, expr, ok := strings.Cut(head, " ")
	if !ok {
		return nil, fmt.Errorf("eval %q: want <dur> <expr>", head)
	}
	d, err := time.ParseDuration(at)
	if err != nil {
		return nil, fmt.Errorf("eval time %q: %w", at, err)
	}
	ev := &evalCmd{at: d, expr: expr, want: map[string]float64{}, tol: 1e-9}
	p := parser.NewParser(parser.Options{})
	for _, b := range body {
		switch {
		case b == "partial":
			ev.partial = true
		case strings.HasPrefix(b, "tolerance "):
			if ev.tol, err = strconv.ParseFloat(strings.TrimPrefix(b, "tolerance "), 64); err != nil {
				return nil, fmt.Errorf("tolerance %q: %w", b, err)
			}
		case strings.HasPrefix(b, "error "):
			ev.errText = strings.TrimPrefix(b, "error ")
		case strings.HasPrefix(b, "warning "):
			ev.warnings = append(ev.warnings, strings.TrimPrefix(b, "warning "))
		case strings.HasPrefix(b, "{"):
			end := labelsEnd(b, 0)
			if end < 0 {
				return nil, fmt.Errorf("expected row %q: unterminated labels", b)
			}
			ls, err := p.ParseMetric(b[:end+1])
			if err != nil {
				return nil, fmt.Errorf("expected row %q: %w", b, err)
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(b[end+1:]), 64)
			if err != nil {
				return nil, fmt.Errorf("expected row %q: value: %w", b, err)
			}
			k := ls.String()
			if _, dup := ev.want[k]; dup {
				return nil, fmt.Errorf("expected row %s appears twice", k)
			}
			ev.want[k] = v
			ev.order = append(ev.order, k)
		default:
			return nil, fmt.Errorf("eval line %q: want {labels} value, tolerance, partial, error or warning", b)
		}
	}
	return ev, nil
}

func runEval(t *testing.T, ng *query.Engine, st storage.Queryable, ev *evalCmd) {
	t.Helper()
	ctx := context.Background()
	ts := time.Unix(0, 0).UTC().Add(ev.at)
	q, err := ng.NewInstantQuery(ctx, st, nil, ev.expr, ts)
	var res *promql.Result
	if err == nil {
		defer q.Close()
		res = q.Exec(ctx)
		err = res.Err
	}
	if ev.errText != "" {
		if err == nil || !strings.Contains(err.Error(), ev.errText) {
			t.Errorf("line %d: %s: error %v, want one containing %q", ev.line, ev.expr, err, ev.errText)
		}
		return
	}
	if err != nil {
		t.Errorf("line %d: %s: %v", ev.line, ev.expr, err)
		return
	}
	for _, w := range ev.warnings {
		found := false
		for k := range res.Warnings {
			found = found || strings.Contains(k, w)
		}
		if !found {
			t.Errorf("line %d: %s: no annotation contains %q; got %v", ev.line, ev.expr, w, res.Warnings)
		}
	}
	got := map[string]float64{}
	switch v := res.Value.(type) {
	case promql.Vector:
		for _, s := range v {
			got[s.Metric.String()] = s.F
		}
	case promql.Scalar:
		got[labels.EmptyLabels().String()] = v.V
	default:
		t.Errorf("line %d: %s: result is a %s, want a vector", ev.line, ev.expr, res.Value.Type())
		return
	}
	for _, k := range ev.order {
		w := ev.want[k]
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("line %d: %s: missing row %s %v", ev.line, ev.expr, k, w)
		case math.IsNaN(w) != math.IsNaN(g) || !math.IsNaN(w) && math.Abs(g-w) > ev.tol*math.Max(1, math.Abs(w)):
			t.Errorf("line %d: %s: row %s = %.17g, want %.17g", ev.line, ev.expr, k, g, w)
		}
	}
	if !ev.partial {
		for k, g := range got {
			if _, ok := ev.want[k]; !ok {
				t.Errorf("line %d: %s: unexpected row %s %v", ev.line, ev.expr, k, g)
			}
		}
	}
}

// loadSeries loads promqltest series text into a test storage.
func loadSeries(t *testing.T, text string) storage.Queryable {
	t.Helper()
	return promqltest.LoadedStorage(t, text)
}

// loadSeriesTB is an empty series storage for benchmarks.
func loadSeriesTB(tb testing.TB) storage.Queryable {
	tb.Helper()
	return promqltest.LoadedStorage(tb, "")
}
