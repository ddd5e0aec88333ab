package tailfn

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/tsdb/records"
)

// RecordSource is where the record functions read request records from;
// *records.Store implements it. Select returns the records with
// mint ≤ Time ≤ maxt (Unix ms) whose labels match every matcher.
type RecordSource interface {
	Select(ctx context.Context, mint, maxt int64, ms ...*labels.Matcher) records.RecordIterator
}

// RecordsMetric is the pseudo-metric name that selects request records in
// a function argument: requests{model_name="x"}[5m]. A selector with no
// name ({model_name="x"}[5m]) selects records too; any other name is an
// error, so a series selector passed by mistake is not silently read as
// records.
const RecordsMetric = "requests"

// StageNames are the canonical stages in record order, the stage label
// values of every record-based result.
var StageNames = func() []string {
	s := make([]string, records.NumStages)
	for i := range s {
		s[i] = records.Stage(i).String()
	}
	return s
}()

// Window is a record selection: the matchers of a selector and the
// closed interval [Mint, Maxt] of record times (Unix ms) it covers.
type Window struct {
	Matchers   []*labels.Matcher
	Mint, Maxt int64
}

// Duration is the window's length.
func (w Window) Duration() time.Duration {
	return time.Duration(w.Maxt-w.Mint+1) * time.Millisecond
}

// WindowAt returns the records window of a range selector evaluated at
// end: (end − rng, end], as Prometheus range selectors are left-open.
func WindowAt(ms []*labels.Matcher, end time.Time, rng time.Duration) Window {
	e := end.UnixMilli()
	return Window{Matchers: ms, Mint: e - rng.Milliseconds() + 1, Maxt: e}
}

// RecordMatchers validates the matchers of a records selector and drops the
// __name__ matcher, which records do not carry.
func RecordMatchers(ms []*labels.Matcher) ([]*labels.Matcher, error) {
	out := make([]*labels.Matcher, 0, len(ms))
	for _, m := range ms {
		if m.Name != model.MetricNameLabel {
			out = append(out, m)
			continue
		}
		if m.Type != labels.MatchEqual || m.Value != RecordsMetric {
			return nil, fmt.Errorf("records are selected as %s{…}[window], not by the name matcher %s", RecordsMetric, m)
		}
	}
	return out, nil
}

// selectorWindow reads argument expr as a records range selector evaluated
// at t, honouring offset and @ <timestamp>: the window is
// (e − range, e] with e = (@ or t) − offset.
func selectorWindow(expr parser.Expr, t time.Time) (Window, error) {
	ms, ok := query.Unwrap(expr).(*parser.MatrixSelector)
	if !ok {
		return Window{}, fmt.Errorf("want a range selector such as %s{model_name=\"x\"}[5m], got %s", RecordsMetric, expr)
	}
	vs, ok := ms.VectorSelector.(*parser.VectorSelector)
	if !ok {
		return Window{}, fmt.Errorf("want a range selector, got %s", expr)
	}
	if ms.RangeExpr != nil && ms.Range == 0 || vs.OriginalOffsetExpr != nil && vs.OriginalOffset == 0 {
		return Window{}, fmt.Errorf("%s: duration expressions are not supported on a records selector; write the duration out", expr)
	}
	if vs.StartOrEnd != 0 {
		return Window{}, fmt.Errorf("%s: @ start() and @ end() are not supported on a records selector; use @ <timestamp>", expr)
	}
	if ms.Range <= 0 {
		return Window{}, fmt.Errorf("%s: range %s must be positive", expr, ms.Range)
	}
	matchers, err := RecordMatchers(vs.LabelMatchers)
	if err != nil {
		return Window{}, err
	}
	end := t
	if vs.Timestamp != nil {
		end = time.UnixMilli(*vs.Timestamp)
	}
	return WindowAt(matchers, end.Add(-vs.OriginalOffset), ms.Range), nil
}

// Population is the request records of one window, columnar.
type Population struct {
	// Requests holds the canonical stages (StageNames) per request; its
	// Total is the end-to-end time, equal to the record's E2E bit for bit
	// unless the record was clamped.
	Requests attribution.Requests
	// TTFT per request, seconds (0 where the source did not report it).
	TTFT []float64
	// Clamped counts records whose residual stage "other" was negative
	// (measured stages overlapping) and was set to 0 so that every stage is
	// a non-negative duration; their S exceeds their E2E by the overlap,
	// at most ClampedMax seconds.
	Clamped    int
	ClampedMax float64
	// Time per request, Unix ms; only filled for the distributed
	// protocol's shards (see LocalShard), nil otherwise.
	Time []int64
}

// ColumnSource is a RecordSource that also reads records column by column,
// decoding only the fields asked for; *records.Store implements it. Its
// SelectColumns returns the records Select returns, in the same order,
// with the same values bit for bit (see records.Store.SelectColumns).
type ColumnSource interface {
	RecordSource
	SelectColumns(ctx context.Context, mint, maxt int64, want records.Columns, ms ...*labels.Matcher) (*records.ColumnBatch, error)
}

// Load reads the records of w into columns. visit, when non-nil, sees every
// record before it is copied (the report reads labels through it); it must
// not keep the pointer.
//
// Without visit, a ColumnSource is read through SelectColumns, which
// decodes only the stage and TTFT columns: for an hour of a fleet it is an
// order of magnitude faster than materialising every record. The result is
// the same either way.
func Load(ctx context.Context, src RecordSource, w Window, visit func(*records.Record)) (Population, error) {
	return load(ctx, src, w, visit, false)
}

// load is Load, also filling Population.Time when withTime is set.
func load(ctx context.Context, src RecordSource, w Window, visit func(*records.Record), withTime bool) (Population, error) {
	if cs, ok := src.(ColumnSource); ok && visit == nil {
		return loadColumns(ctx, cs, w, withTime)
	}
	it := src.Select(ctx, w.Mint, w.Maxt, w.Matchers...)
	defer it.Close()
	var cols [records.NumStages][]float64
	var pop Population
	for it.Next() {
		r := it.At()
		if visit != nil {
			visit(&r)
		}
		if o := r.Stages[records.StageOther]; o < 0 {
			pop.Clamped++
			pop.ClampedMax = math.Max(pop.ClampedMax, -o)
			r.Stages[records.StageOther] = 0
		}
		for j, v := range r.Stages {
			cols[j] = append(cols[j], v)
		}
		pop.TTFT = append(pop.TTFT, r.TTFT)
		if withTime {
			pop.Time = append(pop.Time, r.Time)
		}
	}
	if err := it.Err(); err != nil {
		return Population{}, fmt.Errorf("select records: %w", err)
	}
	reqs, err := attribution.NewRequests(StageNames, cols[:])
	if err != nil {
		return Population{}, fmt.Errorf("load records: %w", err)
	}
	pop.Requests = reqs
	return pop, nil
}

// loadColumns is Load through SelectColumns. The batch's columns become
// the population's without a copy.
func loadColumns(ctx context.Context, src ColumnSource, w Window, withTime bool) (Population, error) {
	want := records.ColumnStages | records.ColumnTTFT
	if withTime {
		want |= records.ColumnTime
	}
	b, err := src.SelectColumns(ctx, w.Mint, w.Maxt, want, w.Matchers...)
	if err != nil {
		return Population{}, fmt.Errorf("select records: %w", err)
	}
	var pop Population
	other := b.Stages[records.StageOther]
	for i, o := range other {
		if o < 0 {
			pop.Clamped++
			pop.ClampedMax = math.Max(pop.ClampedMax, -o)
			other[i] = 0
		}
	}
	reqs, err := attribution.NewRequests(StageNames, b.Stages[:])
	if err != nil {
		return Population{}, fmt.Errorf("load records: %w", err)
	}
	pop.Requests = reqs
	if b.Len > 0 {
		pop.TTFT = b.TTFT
		if withTime {
			pop.Time = b.Time
		}
	}
	return pop, nil
}

// Field returns the per-request values CI functions take: "e2e" (S),
// "ttft", or a stage name.
func (p Population) Field(name string) ([]float64, error) {
	if err := CheckField(name); err != nil {
		return nil, err
	}
	switch name {
	case "e2e":
		return p.Requests.Total(), nil
	case "ttft":
		return p.TTFT, nil
	}
	return p.Requests.Stage(slices.Index(StageNames, name)), nil
}

// CheckField validates a field name for Field.
func CheckField(name string) error {
	if name == "e2e" || name == "ttft" || slices.Contains(StageNames, name) {
		return nil
	}
	return fmt.Errorf("field %q: want e2e, ttft or a stage (%s)", name, strings.Join(StageNames, ", "))
}

// TTFTStageNames are the stages of a TTFT decomposition (TTFTRequests):
// the three before the first token and the residual.
var TTFTStageNames = []string{records.StageQueue.String(), records.StageTokenize.String(), records.StagePrefill.String(), records.StageOther.String()}

// TTFTRequests decomposes time to first token instead of end-to-end time:
// stages queue, tokenize, prefill and a residual "other" = TTFT − their sum.
// Records without a TTFT (0) or whose stages exceed it are skipped and
// counted in skipped.
func (p Population) TTFTRequests() (reqs attribution.Requests, skipped int, err error) {
	reqs, _, skipped, err = p.ttftRequests()
	return reqs, skipped, err
}

// TTFTPopulation is p decomposed as TTFTRequests does, with TTFT and Time
// following the records kept: what a node of the distributed protocol
// answers about for metric ttft.
func (p Population) TTFTPopulation() (Population, int, error) {
	reqs, kept, skipped, err := p.ttftRequests()
	if err != nil {
		return Population{}, 0, err
	}
	return p.kept(reqs, kept), skipped, nil
}

// WithTTFT is p without the records that have no TTFT (0): the requests
// a TTFT quantile is about.
func (p Population) WithTTFT() (Population, error) {
	var kept []int
	for r, t := range p.TTFT {
		if t > 0 {
			kept = append(kept, r)
		}
	}
	cols := make([][]float64, p.Requests.K())
	for j := range cols {
		cols[j] = make([]float64, len(kept))
		for i, r := range kept {
			cols[j][i] = p.Requests.Stage(j)[r]
		}
	}
	reqs, err := attribution.NewRequests(p.Requests.Stages(), cols)
	if err != nil {
		return Population{}, fmt.Errorf("records with a TTFT: %w", err)
	}
	return p.kept(reqs, kept), nil
}

// kept is the population of the records at the indices kept, with reqs
// their requests: TTFT and Time follow, the clamp counts stay the
// window's.
func (p Population) kept(reqs attribution.Requests, kept []int) Population {
	out := Population{Requests: reqs, Clamped: p.Clamped, ClampedMax: p.ClampedMax, TTFT: make([]float64, len(kept))}
	for i, r := range kept {
		out.TTFT[i] = p.TTFT[r]
	}
	if p.Time != nil {
		out.Time = make([]int64, len(kept))
		for i, r := range kept {
			out.Time[i] = p.Time[r]
		}
	}
	return out
}

// ttftRequests is TTFTRequests with the indices of the records kept.
func (p Population) ttftRequests() (reqs attribution.Requests, kept []int, skipped int, err error) {
	part := []records.Stage{records.StageQueue, records.StageTokenize, records.StagePrefill}
	names := make([]string, len(part))
	cols := make([][]float64, len(part))
	var total []float64
	for r, t := range p.TTFT {
		s := 0.0
		for _, st := range part {
			s += p.Requests.Stage(int(st))[r]
		}
		if !(t > 0) || s > t*(1+1e-9) {
			skipped++
			continue
		}
		for j, st := range part {
			cols[j] = append(cols[j], p.Requests.Stage(int(st))[r])
		}
		total = append(total, t)
		kept = append(kept, r)
	}
	for j, st := range part {
		names[j] = st.String()
		if cols[j] == nil {
			cols[j] = []float64{}
		}
	}
	reqs, err = attribution.NewRequestsResidual(names, cols, total, records.StageOther.String())
	return reqs, kept, skipped, err
}
