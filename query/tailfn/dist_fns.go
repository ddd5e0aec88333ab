package tailfn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/query"
)

// The record functions over a Cluster. Each parses its arguments as its
// single-server version does, then computes the same statistic from the
// protocol's primitives (docs/distributed-tails.md): the same quantiles
// bit for bit, the same sums up to the order of addition.

// distSpecs returns the cluster versions of the record functions, none
// for a nil cluster.
func distSpecs(cl *Cluster) map[string]impl {
	if cl == nil {
		return nil
	}
	return map[string]impl{
		"tail_mean":        distBreakdown(cl, attribution.MethodTailMeanRecords),
		"tail_excess":      distBreakdown(cl, attribution.MethodExcess),
		"tail_euler":       distBreakdown(cl, attribution.MethodEuler),
		"tail_heat":        distHeat(cl),
		"quantile_ci":      distQuantileCI(cl),
		"quantile_diff_ci": distQuantileDiffCI(cl),
		"tail_shapley":     distShapley(cl),
	}
}

// distBreakdown implements tail_mean, tail_excess and tail_euler.
func distBreakdown(cl *Cluster, m attribution.Method) impl {
	return func(ctx context.Context, c *query.Call, _ RecordSource) (promql.Vector, annotations.Annotations, error) {
		p, err := levelArg(ctx, c, 0, "p")
		if err != nil {
			return nil, nil, err
		}
		sel, err := statisticArg(c, 2, "contribution", breakdownStats)
		if err != nil {
			return nil, nil, err
		}
		w, err := windowArg(c, 1, "requests")
		if err != nil {
			return nil, nil, err
		}
		var annos annotations.Annotations
		var vec promql.Vector
		err = cl.run(ctx, c.Func.Name, &annos, func(s *attempt, annos *annotations.Annotations) error {
			vec = nil
			v := s.view(w, "e2e")
			cs, err := v.summary()
			if err != nil {
				return err
			}
			noteLoad(c, 1, w, cs.n, cs.clamped, cs.clampedMax, annos)
			if cs.n == 0 {
				return nil
			}
			var b attribution.Breakdown
			k := recordKinds
			if m == attribution.MethodEuler {
				b, err = distEuler(v, cs, p)
				k = eulerKinds
			} else {
				b, err = distTail(v, cs, p, m)
			}
			if err != nil {
				return err
			}
			o := newRows(c)
			emitBreakdown(o, b, k, sel, float64(cs.n))
			vec = o.vec
			return nil
		})
		return vec, annos, err
	}
}

// distTail is attribution.TailMean (m = MethodTailMeanRecords) or
// attribution.Excess: q by selection, then one Sums round over S ≥ q.
func distTail(v *view, cs *clusterSummary, p float64, m attribution.Method) (attribution.Breakdown, error) {
	qs, err := v.quantiles([]float64{p})
	if err != nil {
		return attribution.Breakdown{}, err
	}
	q := qs[0]
	sm, err := v.sums([]Range{{Lo: q, NoHi: true}})
	if err != nil {
		return attribution.Breakdown{}, err
	}
	t := sm[0]
	if t.Count == 0 {
		return attribution.Breakdown{}, fmt.Errorf("BUG: no request at or above the quantile %v of %d", q, cs.n)
	}
	cnt := float64(t.Count)
	contrib := make([]float64, len(t.Stages))
	for j, x := range t.Stages {
		contrib[j] = x / cnt
	}
	target := t.S / cnt
	if m == attribution.MethodExcess {
		n := float64(cs.n)
		for j := range contrib {
			contrib[j] -= cs.stages[j] / n
		}
		target -= cs.s / n
	}
	return noBounds(attribution.Breakdown{
		Method: m, Kind: attribution.KindExact, P: p, Quantile: q, Target: target,
		Stages: v.stageNames(), Contrib: contrib, Residual: target - fsum(contrib), Count: cnt,
	}), nil
}

// distEuler is attribution.Euler with its default box window: the ranks
// a..b by selection, then one round for the sums strictly between x_(a)
// and x_(b) and the requests tied at either end, ordered by (time,
// shard) as one server orders them by (time, append order).
func distEuler(v *view, cs *clusterSummary, p float64) (attribution.Breakdown, error) {
	n := cs.n
	w := math.Max(5, 0.1*float64(n)*math.Min(p, 1-p))
	h := float64(n-1) * p
	a := max(int(math.Ceil(h-w)), 0)
	b := min(int(math.Floor(h+w)), n-1)
	lo := int(h)
	f := h - float64(lo)
	ranks := []int{a, lo, b}
	if f > 0 && lo < n-1 {
		ranks = append(ranks, lo+1)
	}
	slices.Sort(ranks)
	ranks = slices.Compact(ranks)
	vals, err := v.selectRanks(ranks)
	if err != nil {
		return attribution.Breakdown{}, err
	}
	at := func(k int) float64 { i, _ := slices.BinarySearch(ranks, k); return vals[i] }
	va, vb := at(a), at(b)
	q := at(lo)
	if f > 0 && lo < n-1 {
		q += f * (at(lo+1) - q)
	}
	edges := []float64{va}
	if vb != va {
		edges = append(edges, vb)
	}
	resps, err := v.round(func(r *ShardRequest) {
		r.Sums = []Range{{Lo: va, LoOpen: true, Hi: vb, HiOpen: true}}
		r.At = edges
		r.Ties = edges
	})
	if err != nil {
		return attribution.Breakdown{}, err
	}
	inner, err := addSums(v.s.shards, resps, 1)
	if err != nil {
		return attribution.Breakdown{}, err
	}
	acc := slices.Clone(inner[0].Stages)
	count := inner[0].Count
	for e := range edges {
		below := 0
		type tie struct {
			t      int64
			shard  int
			stages []float64
		}
		var ties []tie
		for si, r := range resps {
			if len(r.At) != len(edges) || len(r.Ties) != len(edges) {
				return attribution.Breakdown{}, fmt.Errorf("shard %s: answers for %d edges, want %d", v.s.shards[si].Name(), len(r.Ties), len(edges))
			}
			below += r.At[e].Below
			for _, tr := range r.Ties[e] {
				if len(tr.Stages) != len(acc) {
					return attribution.Breakdown{}, fmt.Errorf("shard %s: tied request with %d stages, want %d", v.s.shards[si].Name(), len(tr.Stages), len(acc))
				}
				ties = append(ties, tie{tr.Time, si, tr.Stages})
			}
		}
		slices.SortStableFunc(ties, func(x, y tie) int {
			if c := cmp.Compare(x.t, y.t); c != 0 {
				return c
			}
			return cmp.Compare(x.shard, y.shard)
		})
		for i, tr := range ties {
			if r := below + i; r >= a && r <= b {
				count++
				for j, s := range tr.stages {
					acc[j] += s
				}
			}
		}
	}
	if count != b-a+1 {
		return attribution.Breakdown{}, fmt.Errorf("BUG: euler window of ranks %d..%d holds %d requests", a, b, count)
	}
	wsum := float64(count)
	contrib := make([]float64, len(acc))
	for j, s := range acc {
		contrib[j] = s / wsum
	}
	return noBounds(attribution.Breakdown{
		Method: attribution.MethodEuler, Kind: attribution.KindEstimate, P: p, Quantile: q, Target: q,
		Stages: v.stageNames(), Contrib: contrib, Residual: q - fsum(contrib), Count: wsum,
	}), nil
}

// distHeat implements tail_heat: every band edge by selection in the
// same rounds, then one Sums round with a range per band.
func distHeat(cl *Cluster) impl {
	return func(ctx context.Context, c *query.Call, _ RecordSource) (promql.Vector, annotations.Annotations, error) {
		sel, err := statisticArg(c, 1, "share", heatStats)
		if err != nil {
			return nil, nil, err
		}
		lv, err := optString(c, 2, "")
		if err != nil {
			return nil, nil, err
		}
		bands := attribution.DefaultBands()
		if lv != "" {
			if bands, err = ParseLevels(lv); err != nil {
				return nil, nil, argError(c, 2, "levels", err)
			}
		}
		w, err := windowArg(c, 0, "requests")
		if err != nil {
			return nil, nil, err
		}
		var annos annotations.Annotations
		var vec promql.Vector
		err = cl.run(ctx, c.Func.Name, &annos, func(s *attempt, annos *annotations.Annotations) error {
			vec = nil
			v := s.view(w, "e2e")
			cs, err := v.summary()
			if err != nil {
				return err
			}
			noteLoad(c, 0, w, cs.n, cs.clamped, cs.clampedMax, annos)
			if cs.n == 0 {
				return nil
			}
			h, err := distHeatTable(v, bands)
			if err != nil {
				return err
			}
			o := newRows(c)
			emitHeat(o, h, sel)
			vec = o.vec
			return nil
		})
		return vec, annos, err
	}
}

// distHeatTable is attribution.HeatTable over the cluster: every band
// edge by selection in the same rounds, then one Sums round with a range
// per band. The view's window must hold requests.
func distHeatTable(v *view, bands []attribution.Band) (attribution.Heat, error) {
	levels := make([]float64, 0, 2*len(bands))
	for _, b := range bands {
		levels = append(levels, b.Lo, b.Hi)
	}
	slices.Sort(levels)
	levels = slices.Compact(levels)
	qs, err := v.quantiles(levels)
	if err != nil {
		return attribution.Heat{}, err
	}
	atLevel := func(p float64) float64 { i, _ := slices.BinarySearch(levels, p); return qs[i] }
	rs := make([]Range, len(bands))
	for i, b := range bands {
		rs[i] = Range{Lo: atLevel(b.Lo), Hi: atLevel(b.Hi), HiOpen: true, NoHi: b.Hi == 1}
	}
	sm, err := v.sums(rs)
	if err != nil {
		return attribution.Heat{}, err
	}
	h := attribution.Heat{Stages: v.stageNames(), Rows: make([]attribution.HeatRow, len(bands))}
	for i, b := range bands {
		row := attribution.HeatRow{Band: b, From: rs[i].Lo, To: atLevel(b.Hi), Count: sm[i].Count, Top: -1, StageMean: make([]float64, len(v.stageNames()))}
		if row.Count == 0 {
			for j := range row.StageMean {
				row.StageMean[j] = math.NaN()
			}
			row.MeanS, row.TopShare = math.NaN(), math.NaN()
			h.Rows[i] = row
			continue
		}
		m := float64(row.Count)
		for j, x := range sm[i].Stages {
			row.StageMean[j] = x / m
		}
		row.MeanS = sm[i].S / m
		for j, x := range row.StageMean {
			if row.Top < 0 || x > row.StageMean[row.Top] {
				row.Top = j
			}
		}
		row.TopStage = v.stageNames()[row.Top]
		row.TopShare = math.NaN()
		if row.MeanS > 0 {
			row.TopShare = row.StageMean[row.Top] / row.MeanS
		}
		h.Rows[i] = row
	}
	return h, nil
}

// rankWindow holds the order statistics of ranks [off, off+len(v)) of n.
type rankWindow struct {
	n, off int
	v      []float64
}

func (w rankWindow) Len() int { return w.n }
func (w rankWindow) At(r int) float64 {
	if r < w.off || r >= w.off+len(w.v) {
		panic(fmt.Sprintf("BUG: rank %d read outside the fetched ranks [%d, %d) of %d", r, w.off, w.off+len(w.v), w.n))
	}
	return w.v[r-w.off]
}

// distQuantileCI implements quantile_ci: the bootstrap and Maritz–Jarrett
// from the order statistics of the rank span they read, the delta method
// from sums.
func distQuantileCI(cl *Cluster) impl {
	return func(ctx context.Context, c *query.Call, _ RecordSource) (promql.Vector, annotations.Annotations, error) {
		p, err := levelArg(ctx, c, 0, "p")
		if err != nil {
			return nil, nil, err
		}
		level, err := levelArg(ctx, c, 1, "level")
		if err != nil {
			return nil, nil, err
		}
		opts, err := ciOptions(c, 3)
		if err != nil {
			return nil, nil, err
		}
		field, err := fieldArg(c, 4)
		if err != nil {
			return nil, nil, err
		}
		w, err := windowArg(c, 2, "requests")
		if err != nil {
			return nil, nil, err
		}
		var annos annotations.Annotations
		var vec promql.Vector
		err = cl.run(ctx, c.Func.Name, &annos, func(s *attempt, annos *annotations.Annotations) error {
			vec = nil
			v := s.view(w, field)
			cs, err := v.summary()
			if err != nil {
				return err
			}
			noteLoad(c, 2, w, cs.n, cs.clamped, cs.clampedMax, annos)
			if cs.n == 0 {
				return nil
			}
			var iv attribution.Interval
			switch opts.Method {
			case attribution.CIDeltaKDE:
				iv, err = distDelta(v, cs, p, level)
			case attribution.CIOrderStatistic:
				iv, err = distOrderStat(v, cs, p, level)
			default:
				iv, err = distOrdered(v, cs, p, level, opts, cl.opts.MaxCIValues, c.Func.Name, annos)
			}
			if errors.Is(err, attribution.ErrInvalidMethod) {
				return fmt.Errorf("%s: %w", c.Func.Name, err)
			}
			var de dataError
			if asDataError(err, &de) {
				vec, *annos = warnDataAnnos(c, *annos, de.err)
				return nil
			}
			if err != nil {
				return err
			}
			o := newRows(c)
			m := iv.Method.String()
			o.stat(iv.Estimate, field, m, attribution.KindExact, "quantile")
			o.stat(iv.Lower, field, m, attribution.KindEstimate, "lower")
			o.stat(iv.Upper, field, m, attribution.KindEstimate, "upper")
			o.stat(iv.SE, field, m, attribution.KindEstimate, "se")
			o.stat(float64(cs.n), field, m, attribution.KindExact, "requests")
			vec = o.vec
			return nil
		})
		return vec, annos, err
	}
}

// dataError marks an error the statistics raise on the data (too few
// requests for a method): a warning and no result, as warnData makes it.
type dataError struct{ err error }

func (e dataError) Error() string { return e.err.Error() }

func asDataError(err error, de *dataError) bool {
	d, ok := err.(dataError)
	if ok {
		*de = d
	}
	return ok
}

// warnDataAnnos is warnData for a closure that reports through annos.
func warnDataAnnos(c *query.Call, annos annotations.Annotations, err error) (promql.Vector, annotations.Annotations) {
	v, a, _ := warnData(c, annos, err)
	return v, a
}

// distOrdered is the bootstrap or Maritz–Jarrett interval from the order
// statistics of the rank span it reads, when that span holds at most
// maxValues ranks; past it (the span grows as √n), the order-statistic
// interval answers instead, from four selected ranks, with an info
// annotation saying so, so that traffic stays bounded whatever n is.
func distOrdered(v *view, cs *clusterSummary, p, level float64, opts attribution.CIOptions, maxValues int, fn string, annos *annotations.Annotations) (attribution.Interval, error) {
	lo, hi, err := attribution.QuantileCIRanks(cs.n, p, level, opts)
	if errors.Is(err, attribution.ErrInvalidMethod) {
		return attribution.Interval{}, err
	}
	if err != nil {
		return attribution.Interval{}, dataError{err}
	}
	if span := hi - lo + 1; span > maxValues {
		iv, err := distOrderStat(v, cs, p, level)
		if err == nil {
			annos.Add(fmt.Errorf("%w: %s: the %s interval of %d requests reads %d order statistics (more than %d); across nodes it is answered with method order_statistic, whose traffic does not grow with the requests",
				annotations.PromQLInfo, fn, opts.Method, cs.n, span, maxValues))
		}
		return iv, err
	}
	win, err := v.rankWindow(cs.n, lo, hi)
	if err != nil {
		return attribution.Interval{}, err
	}
	iv, err := attribution.QuantileCIOrdered(win, p, level, opts)
	if err != nil {
		return attribution.Interval{}, dataError{err}
	}
	return iv, nil
}

// rankWindow fetches the order statistics of ranks lo..hi of the view's n
// values: the two ends by selection, then every value between them.
func (v *view) rankWindow(n, lo, hi int) (rankWindow, error) {
	ranks := []int{lo}
	if hi != lo {
		ranks = append(ranks, hi)
	}
	vals, err := v.selectRanks(ranks)
	if err != nil {
		return rankWindow{}, err
	}
	rg := Range{Lo: vals[0], Hi: vals[len(vals)-1]}
	resps, err := v.round(func(r *ShardRequest) { r.Values = &rg })
	if err != nil {
		return rankWindow{}, err
	}
	win := rankWindow{n: n}
	for si, r := range resps {
		if r.Values == nil {
			return rankWindow{}, fmt.Errorf("shard %s: values missing from its answer", v.s.shards[si].Name())
		}
		win.off += r.Values.Below
		win.v = append(win.v, r.Values.V...)
	}
	slices.Sort(win.v)
	if win.off > lo || win.off+len(win.v) <= hi {
		return rankWindow{}, fmt.Errorf("BUG: fetched ranks [%d, %d) do not cover [%d, %d]", win.off, win.off+len(win.v), lo, hi)
	}
	return win, nil
}

// orderStatSet selects the ranks the order-statistic interval at level
// reads from the view's n values.
func (v *view) orderStatSet(n int, p, level float64) (rankSet, error) {
	ranks, err := attribution.OrderStatRanksFor(n, p, level)
	if err != nil {
		return rankSet{}, dataError{err}
	}
	vals, err := v.selectRanks(ranks)
	if err != nil {
		return rankSet{}, err
	}
	return rankSet{n: n, ranks: ranks, v: vals}, nil
}

// distOrderStat is the order-statistic interval: its two binomial ranks
// and the estimate's one or two are selected in the same rounds, so its
// traffic is that of tail_mean's quantile, independent of n.
func distOrderStat(v *view, cs *clusterSummary, p, level float64) (attribution.Interval, error) {
	ranks, err := attribution.OrderStatRanksFor(cs.n, p, level)
	if errors.Is(err, attribution.ErrInvalidMethod) {
		return attribution.Interval{}, fmt.Errorf("quantile ci: %w", err)
	}
	if err != nil {
		return attribution.Interval{}, dataError{err}
	}
	vals, err := v.selectRanks(ranks)
	if err != nil {
		return attribution.Interval{}, err
	}
	iv, err := attribution.QuantileCIOrdered(rankSet{n: cs.n, ranks: ranks, v: vals}, p, level,
		attribution.CIOptions{Method: attribution.CIOrderStatistic})
	if err != nil {
		return attribution.Interval{}, dataError{err}
	}
	return iv, nil
}

// rankSet holds the order statistics of the ascending ranks of n.
type rankSet struct {
	n     int
	ranks []int
	v     []float64
}

func (s rankSet) Len() int { return s.n }
func (s rankSet) At(r int) float64 {
	i, ok := slices.BinarySearch(s.ranks, r)
	if !ok {
		panic(fmt.Sprintf("BUG: rank %d read outside the selected ranks %v of %d", r, s.ranks, s.n))
	}
	return s.v[i]
}

func distDelta(v *view, cs *clusterSummary, p, level float64) (attribution.Interval, error) {
	if cs.n < 2 {
		_, err := attribution.DeltaCI(attribution.DeltaSummary{N: cs.n}, p, level)
		return attribution.Interval{}, dataError{err}
	}
	qs, err := v.quantiles([]float64{0.25, 0.75, p})
	if err != nil {
		return attribution.Interval{}, err
	}
	mean := cs.sum / float64(cs.n)
	resps, err := v.round(func(r *ShardRequest) { r.Moment = &mean })
	if err != nil {
		return attribution.Interval{}, err
	}
	ss := 0.0
	for _, r := range resps {
		ss += r.Moment
	}
	var roundErr error
	sum := attribution.DeltaSummary{
		N: cs.n, SS: ss, IQR: qs[1] - qs[0], Estimate: qs[2],
		KernelSum: func(q, bw float64) (float64, error) {
			resps, err := v.round(func(r *ShardRequest) { r.Kernel = &KernelQuery{Q: q, BW: bw} })
			if err != nil {
				roundErr = err
				return 0, err
			}
			k := 0.0
			for _, r := range resps {
				k += r.Kernel
			}
			return k, nil
		},
	}
	iv, err := attribution.DeltaCI(sum, p, level)
	if roundErr != nil {
		return attribution.Interval{}, roundErr
	}
	if errors.Is(err, attribution.ErrInvalidMethod) {
		return attribution.Interval{}, err
	}
	if err != nil {
		return attribution.Interval{}, dataError{err}
	}
	return iv, nil
}

// distShapley implements tail_shapley over the stage columns of both
// windows from every node (the one function whose traffic grows with the
// requests; docs/distributed-tails.md says why).
func distShapley(cl *Cluster) impl {
	return func(ctx context.Context, c *query.Call, _ RecordSource) (promql.Vector, annotations.Annotations, error) {
		p, err := levelArg(ctx, c, 0, "p")
		if err != nil {
			return nil, nil, err
		}
		allowed := append([]string{"baseline", "all_reverted"}, breakdownStats...)
		sel, err := statisticArg(c, 3, "contribution", allowed)
		if err != nil {
			return nil, nil, err
		}
		wNow, err := windowArg(c, 1, "requests now")
		if err != nil {
			return nil, nil, err
		}
		wBase, err := windowArg(c, 2, "baseline requests")
		if err != nil {
			return nil, nil, err
		}
		var annos annotations.Annotations
		var vec promql.Vector
		err = cl.run(ctx, c.Func.Name, &annos, func(s *attempt, annos *annotations.Annotations) error {
			vec = nil
			now, err := s.view(wNow, "e2e").columns(c, 1, annos)
			if err != nil {
				return err
			}
			base, err := s.view(wBase, "e2e").columns(c, 2, annos)
			if err != nil || now.Len() == 0 || base.Len() == 0 {
				return err
			}
			res, err := attribution.Shapley(now, base, p)
			if err != nil {
				vec, *annos = warnDataAnnos(c, *annos, err)
				return nil
			}
			o := newRows(c)
			emitBreakdown(o, res.Breakdown, recordKinds, sel, float64(now.Len()))
			m := res.Method.String()
			if sel == "all" || sel == "baseline" {
				o.stat(res.Baseline, StageE2E, m, attribution.KindExact, "baseline")
			}
			if sel == "all" || sel == "all_reverted" {
				o.stat(res.AllReverted, StageE2E, m, attribution.KindExact, "all_reverted")
			}
			vec = o.vec
			return nil
		})
		return vec, annos, err
	}
}

// columns fetches the stage columns of the view's window from every node
// and joins them in shard order.
func (v *view) columns(c *query.Call, arg int, annos *annotations.Annotations) (attribution.Requests, error) {
	reqs, clamped, clampedMax, err := v.stageColumns(c.Func.Name)
	if err != nil {
		return attribution.Requests{}, err
	}
	noteLoad(c, arg, v.w, reqs.Len(), clamped, clampedMax, annos)
	return reqs, nil
}

// stageColumns fetches the stage columns of the view's window from every
// node and joins them in shard order, with the clamped requests' count
// and largest clamp; fn names the caller in errors.
func (v *view) stageColumns(fn string) (reqs attribution.Requests, clamped int, clampedMax float64, err error) {
	resps, err := v.round(func(r *ShardRequest) { r.Columns = true })
	if err != nil {
		return attribution.Requests{}, 0, 0, err
	}
	v.skipped = 0
	cols := make([][]float64, len(v.stageNames()))
	n := 0
	for si, r := range resps {
		if len(r.Columns) != len(cols) {
			return attribution.Requests{}, 0, 0, fmt.Errorf("shard %s: %d stage columns, want %d", v.s.shards[si].Name(), len(r.Columns), len(cols))
		}
		for j, col := range r.Columns {
			if len(col) != r.N {
				return attribution.Requests{}, 0, 0, fmt.Errorf("shard %s: stage %s has %d values for %d records", v.s.shards[si].Name(), v.stageNames()[j], len(col), r.N)
			}
			cols[j] = append(cols[j], col...)
		}
		n += r.N
		v.skipped += r.Skipped
		clamped += r.Clamped
		clampedMax = math.Max(clampedMax, r.ClampedMax)
	}
	for j := range cols {
		if cols[j] == nil {
			cols[j] = []float64{}
		}
	}
	reqs, err = attribution.NewRequests(v.stageNames(), cols)
	if err != nil {
		return attribution.Requests{}, 0, 0, fmt.Errorf("%s: records from the nodes: %w", fn, err)
	}
	if reqs.Len() != n {
		return attribution.Requests{}, 0, 0, fmt.Errorf("BUG: %d records joined from %d", reqs.Len(), n)
	}
	return reqs, clamped, clampedMax, nil
}

// noBounds marks the bound fields of a breakdown that has none, as
// attribution does.
func noBounds(b attribution.Breakdown) attribution.Breakdown {
	nan := math.NaN()
	b.TargetLower, b.TargetUpper = nan, nan
	b.QuantileLower, b.QuantileUpper = nan, nan
	return b
}

func fsum(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s
}

// distQuantileDiffCI implements quantile_diff_ci over the cluster: the
// interval of P_p(b) − P_p(a) as one server computes it
// (attribution.QuantileDiffCI of b and a), from the same primitives as
// quantile_ci: the order statistic from four selected ranks per window;
// the bootstrap and Maritz–Jarrett from the rank spans they read, up to
// ClusterOptions.MaxCIValues values in all, else by the order statistic
// with an info annotation; the delta method from sums.
func distQuantileDiffCI(cl *Cluster) impl {
	return func(ctx context.Context, c *query.Call, _ RecordSource) (promql.Vector, annotations.Annotations, error) {
		p, err := levelArg(ctx, c, 0, "p")
		if err != nil {
			return nil, nil, err
		}
		level, err := levelArg(ctx, c, 1, "level")
		if err != nil {
			return nil, nil, err
		}
		opts, err := ciOptions(c, 4)
		if err != nil {
			return nil, nil, err
		}
		field, err := fieldArg(c, 5)
		if err != nil {
			return nil, nil, err
		}
		wa, err := windowArg(c, 2, "requests a")
		if err != nil {
			return nil, nil, err
		}
		wb, err := windowArg(c, 3, "requests b")
		if err != nil {
			return nil, nil, err
		}
		var annos annotations.Annotations
		var vec promql.Vector
		err = cl.run(ctx, c.Func.Name, &annos, func(s *attempt, annos *annotations.Annotations) error {
			vec = nil
			va, vb := s.view(wa, field), s.view(wb, field)
			ca, err := va.summary()
			if err != nil {
				return err
			}
			noteLoad(c, 2, wa, ca.n, ca.clamped, ca.clampedMax, annos)
			cb, err := vb.summary()
			if err != nil {
				return err
			}
			noteLoad(c, 3, wb, cb.n, cb.clamped, cb.clampedMax, annos)
			if ca.n == 0 || cb.n == 0 {
				return nil
			}
			// attribution's first sample is b: P(b) − P(a).
			if err := attribution.CheckDiffCI(cb.n, ca.n, p, level, opts.Method); err != nil {
				if errors.Is(err, attribution.ErrInvalidMethod) {
					return fmt.Errorf("%s: %w", c.Func.Name, err)
				}
				vec, *annos = warnDataAnnos(c, *annos, err)
				return nil
			}
			iv, qb, qa, err := distDiff(vb, cb, va, ca, p, level, opts, cl.opts.MaxCIValues, c.Func.Name, annos)
			var de dataError
			if asDataError(err, &de) {
				vec, *annos = warnDataAnnos(c, *annos, de.err)
				return nil
			}
			if err != nil {
				return err
			}
			o := newRows(c)
			m := iv.Method.String()
			o.stat(qa, field, m, attribution.KindExact, "a")
			o.stat(qb, field, m, attribution.KindExact, "b")
			o.stat(iv.Estimate, field, m, attribution.KindExact, "diff")
			o.stat(iv.Lower, field, m, attribution.KindEstimate, "lower")
			o.stat(iv.Upper, field, m, attribution.KindEstimate, "upper")
			o.stat(iv.SE, field, m, attribution.KindEstimate, "se")
			vec = o.vec
			return nil
		})
		return vec, annos, err
	}
}

// distDiff returns the interval of P_p(x) − P_p(y) and the two quantiles.
func distDiff(vx *view, cx *clusterSummary, vy *view, cy *clusterSummary, p, level float64, opts attribution.CIOptions, maxValues int, fn string, annos *annotations.Annotations) (iv attribution.Interval, qx, qy float64, err error) {
	if opts.Method == attribution.CIDeltaKDE {
		ix, err := distDelta(vx, cx, p, level)
		if err != nil {
			return iv, 0, 0, err
		}
		iy, err := distDelta(vy, cy, p, level)
		if err != nil {
			return iv, 0, 0, err
		}
		return attribution.NormalDiff(ix, iy, level), ix.Estimate, iy.Estimate, nil
	}
	var sx, sy attribution.OrderStats
	if opts.Method != attribution.CIOrderStatistic {
		rx, ry, err := attribution.QuantileDiffCIRanks(cx.n, cy.n, p, level, opts)
		if err != nil {
			return iv, 0, 0, dataError{err}
		}
		if span := rx[1] - rx[0] + 1 + ry[1] - ry[0] + 1; span > maxValues {
			annos.Add(fmt.Errorf("%w: %s: the %s interval of %d and %d requests reads %d order statistics (more than %d); across nodes it is answered with method order_statistic, whose traffic does not grow with the requests",
				annotations.PromQLInfo, fn, opts.Method, cx.n, cy.n, span, maxValues))
			opts = attribution.CIOptions{Method: attribution.CIOrderStatistic}
			if err := attribution.CheckDiffCI(cx.n, cy.n, p, level, opts.Method); err != nil {
				return iv, 0, 0, fmt.Errorf("%s: %w", fn, err)
			}
		} else {
			wx, err := vx.rankWindow(cx.n, rx[0], rx[1])
			if err != nil {
				return iv, 0, 0, err
			}
			wy, err := vy.rankWindow(cy.n, ry[0], ry[1])
			if err != nil {
				return iv, 0, 0, err
			}
			sx, sy = wx, wy
		}
	}
	if opts.Method == attribution.CIOrderStatistic {
		each := math.Sqrt(level)
		ox, err := vx.orderStatSet(cx.n, p, each)
		if err != nil {
			return iv, 0, 0, err
		}
		oy, err := vy.orderStatSet(cy.n, p, each)
		if err != nil {
			return iv, 0, 0, err
		}
		sx, sy = ox, oy
	}
	iv, err = attribution.QuantileDiffCIOrdered(sx, sy, p, level, opts)
	if err != nil {
		return iv, 0, 0, dataError{err}
	}
	return iv, attribution.QuantileOrdered(sx, p), attribution.QuantileOrdered(sy, p), nil
}
