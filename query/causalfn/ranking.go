package causalfn

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/attribution/causal"
	"github.com/tailroot/tailroot/attribution/rca"
	"github.com/tailroot/tailroot/query"
)

// minCoverage is the share of the target's points a candidate must have to
// join a ranking; one with fewer is left out (with a warning) rather than
// cutting every other candidate's window down to its points.
const minCoverage = 0.5

// finite returns s without its NaN and infinite points, and how many it
// dropped.
func finite(s series) (series, int) {
	out := series{labels: s.labels, family: s.family}
	for i, v := range s.v {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out.t = append(out.t, s.t[i])
			out.v = append(out.v, v)
		}
	}
	return out, len(s.v) - len(out.v)
}

// dropped annotates the points finite removed.
func dropped(annos *annotations.Annotations, fn string, s *series, n int) {
	if n == 0 {
		return
	}
	if *annos == nil {
		*annos = annotations.Annotations{}
	}
	annos.Add(fmt.Errorf("%w: %s: %d NaN or missing points of %s left out", annotations.PromQLInfo, fn, n, s.id()))
}

// funcChangePoint: change_point(series [, hazard]).
func funcChangePoint(ctx context.Context, c *query.Call) (promql.Vector, annotations.Annotations, error) {
	ss, err := matrixArg(ctx, c, arg{0, "series"})
	if err != nil {
		return nil, nil, err
	}
	opts := causal.BOCPDOptions{}
	if len(c.Args) > 1 {
		a := arg{1, "hazard"}
		h, err := c.Scalar(ctx, a.index)
		if err != nil {
			return nil, nil, err
		}
		if !(h > 0 && h < 1) {
			return nil, nil, fmt.Errorf("%s: %s must be in (0, 1), got %v", c.Func.Name, a, h)
		}
		opts.Hazard = h
	}
	res := &result{t: c.T.UnixMilli()}
	var annos annotations.Annotations
	k := &skipper{fn: c.Func.Name}
	for i := range ss {
		s, n := finite(ss[i])
		dropped(&annos, c.Func.Name, &s, n)
		if len(s.v) < 3 {
			k.fail(&s, fmt.Errorf("%d points, need 3: %w", len(s.v), causal.ErrTooShort))
			continue
		}
		det, err := causal.BOCPD(causal.Series{Name: s.id(), Values: s.v}, opts)
		if err != nil {
			k.fail(&s, err)
			continue
		}
		res.add(&s, det.BestProb, "statistic", "probability")
		res.add(&s, float64(s.t[det.Best])/1000, "statistic", "change_time")
		res.add(&s, float64(len(det.ChangePoints)), "statistic", "change_points")
		k.ok++
	}
	warn, err := k.done(len(ss))
	annos.Merge(warn)
	sortStats(res.vec)
	return res.vec, annos, err
}

// ranking is the aligned input of robust_score and root_cause.
type ranking struct {
	target series
	ts     []int64
	tv     []float64
	cands  []series
	vals   [][]float64
	annos  annotations.Annotations
}

// loadRanking evaluates the target and the candidates and puts them on one
// grid: the target's finite points, less those a kept candidate lacks.
// Candidates covering less than minCoverage of the target are left out
// with a warning.
func loadRanking(ctx context.Context, c *query.Call) (*ranking, error) {
	t, err := oneArg(ctx, c, arg{0, "target"})
	if err != nil {
		return nil, err
	}
	r := &ranking{}
	var n int
	r.target, n = finite(t)
	dropped(&r.annos, c.Func.Name, &r.target, n)
	for i := 1; i < len(c.Args); i++ {
		cs, err := matrixArg(ctx, c, arg{i, "candidates"})
		if err != nil {
			return nil, err
		}
		r.cands = append(r.cands, cs...)
	}
	seen := map[string]bool{}
	kept := []*series{&r.target}
	var keptCands []series
	for i := range r.cands {
		s := &r.cands[i]
		id := s.id()
		if seen[id] {
			return nil, fmt.Errorf("%s: candidate %s appears twice; give the series of each argument distinct labels (label_replace)", c.Func.Name, id)
		}
		seen[id] = true
		ts, _ := align(&r.target, s)
		if float64(len(ts)) < minCoverage*float64(len(r.target.t)) {
			if r.annos == nil {
				r.annos = annotations.Annotations{}
			}
			r.annos.Add(fmt.Errorf("%w: %s: candidate %s left out: it has values at %d of the target's %d points, under %.0f%%",
				annotations.PromQLWarning, c.Func.Name, id, len(ts), len(r.target.t), 100*minCoverage))
			continue
		}
		keptCands = append(keptCands, *s)
	}
	r.cands = keptCands
	for i := range r.cands {
		kept = append(kept, &r.cands[i])
	}
	ts, vals := align(kept...)
	if lost := len(r.target.t) - len(ts); lost > 0 && len(r.cands) > 0 {
		if r.annos == nil {
			r.annos = annotations.Annotations{}
		}
		r.annos.Add(fmt.Errorf("%w: %s: %d of the target's %d points left out where a candidate has no value",
			annotations.PromQLInfo, c.Func.Name, lost, len(r.target.t)))
	}
	r.ts, r.tv, r.vals = ts, vals[0], vals[1:]
	return r, nil
}

func (r *ranking) targetSeries() causal.Series {
	return causal.Series{Name: r.target.id(), Values: r.tv}
}

// funcRobustScore: robust_score(target, candidates…): plain BARO at the
// change point root_cause uses.
func funcRobustScore(ctx context.Context, c *query.Call) (promql.Vector, annotations.Annotations, error) {
	r, err := loadRanking(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	if len(r.cands) == 0 {
		return nil, r.annos, nil
	}
	cp, _, err := rca.ChangePoint(r.targetSeries(), rca.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %s: %w", c.Func.Name, arg{0, "target"}, err)
	}
	cs := make([]causal.Series, len(r.cands))
	idx := map[string]int{}
	for i := range r.cands {
		cs[i] = causal.Series{Name: r.cands[i].id(), Values: r.vals[i]}
		idx[cs[i].Name] = i
	}
	scores, err := causal.RobustScores(cs, cp, false)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.Func.Name, err)
	}
	res := &result{t: c.T.UnixMilli()}
	for k, sc := range scores {
		s := &r.cands[idx[sc.Name]]
		res.add(s, sc.Score, "statistic", "score")
		res.add(s, float64(k+1), "statistic", "rank")
		res.add(s, float64(r.ts[cp])/1000, "statistic", "change_time")
	}
	sortStats(res.vec)
	return res.vec, r.annos, nil
}

// funcRootCause: root_cause(target, candidates…): rca.Rank.
func funcRootCause(ctx context.Context, c *query.Call) (promql.Vector, annotations.Annotations, error) {
	r, err := loadRanking(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	if len(r.cands) == 0 {
		return nil, r.annos, nil
	}
	cands := make([]rca.Candidate, len(r.cands))
	idx := map[string]int{}
	for i := range r.cands {
		s := &r.cands[i]
		cands[i] = rca.Candidate{Name: s.id(), Metric: s.name(), Labels: s.labels.Map(), Values: r.vals[i]}
		idx[cands[i].Name] = i
	}
	rk, err := rca.Rank(r.targetSeries(), cands, rca.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.Func.Name, err)
	}
	res := &result{t: c.T.UnixMilli()}
	for _, x := range rk.Ranking {
		s := &r.cands[idx[x.Name]]
		node := x.Node
		if node == "" {
			node = "unmapped"
		}
		add := func(stat string, f float64) { res.add(s, f, "statistic", stat, "node", node) }
		add("score", x.Score)
		add("rank", float64(x.Rank))
		add("baro_score", x.BARO)
		add("shift", x.Shift)
		add("p_value", x.PValue)
		add("q_value", x.QValue)
		add("anomalous", b2f(x.Anomalous))
		add("explained", b2f(x.Explained != ""))
		add("precedes", b2f(x.Precedes))
		add("informative", b2f(x.Informative))
		add("granger_q", x.GrangerQ)
		add("change_time", float64(r.ts[rk.ChangePoint])/1000)
	}
	// The verdict: one sample without a candidate, valued at the change
	// time, whose verdict label is "incident", "no incident" or
	// "unexplained".
	res.vec = append(res.vec, promql.Sample{Metric: labels.FromStrings("statistic", "verdict", "verdict", rk.Verdict), T: res.t, F: float64(r.ts[rk.ChangePoint]) / 1000})
	sortStats(res.vec)
	return res.vec, r.annos, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// funcDrift: drift(current, reference [, bins]).
func funcDrift(ctx context.Context, c *query.Call) (promql.Vector, annotations.Annotations, error) {
	cur, err := matrixArg(ctx, c, arg{0, "current"})
	if err != nil {
		return nil, nil, err
	}
	ref, err := matrixArg(ctx, c, arg{1, "reference"})
	if err != nil {
		return nil, nil, err
	}
	bins := 0
	if len(c.Args) > 2 {
		if bins, err = intArg(ctx, c, arg{2, "bins"}, 2, 1000); err != nil {
			return nil, nil, err
		}
	}
	byKey := map[string]*series{}
	for i := range ref {
		k := ref[i].labels.DropReserved(isMetricName).String()
		if byKey[k] != nil {
			return nil, nil, fmt.Errorf("%s: %s has two series with labels %s once the metric name is dropped", c.Func.Name, arg{1, "reference"}, k)
		}
		byKey[k] = &ref[i]
	}
	var annos annotations.Annotations
	k := &skipper{fn: c.Func.Name}
	type row struct {
		s         *series
		d, p, psi float64
	}
	var rows []row
	for i := range cur {
		s := &cur[i]
		rs := byKey[s.labels.DropReserved(isMetricName).String()]
		if rs == nil {
			k.fail(s, fmt.Errorf("no series with its labels in %s", arg{1, "reference"}))
			continue
		}
		a, na := finite(*s)
		b, nb := finite(*rs)
		dropped(&annos, c.Func.Name, s, na)
		dropped(&annos, c.Func.Name, rs, nb)
		cs, rss := causal.Series{Name: s.id(), Values: a.v}, causal.Series{Name: rs.id() + " (reference)", Values: b.v}
		d, p, err := causal.KSTest(rss, cs)
		if err != nil {
			k.fail(s, err)
			continue
		}
		psi, err := causal.PSI(rss, cs, bins)
		if err != nil {
			k.fail(s, err)
			continue
		}
		rows = append(rows, row{s: s, d: d, p: p, psi: psi})
		k.ok++
	}
	// Rank as causal.RankDrift: KS statistic, then PSI, largest first.
	slices.SortStableFunc(rows, func(a, b row) int {
		if c := cmp.Compare(b.d, a.d); c != 0 {
			return c
		}
		return cmp.Compare(b.psi, a.psi)
	})
	res := &result{t: c.T.UnixMilli()}
	for i, r := range rows {
		res.add(r.s, r.d, "statistic", "ks")
		res.add(r.s, r.p, "statistic", "ks_p_value")
		res.add(r.s, r.psi, "statistic", "psi")
		res.add(r.s, float64(i+1), "statistic", "rank")
	}
	warn, err := k.done(len(cur))
	annos.Merge(warn)
	sortStats(res.vec)
	return res.vec, annos, err
}

// funcStatistic is statistic(v, "name"): the elements of v whose statistic
// label is name, with that label removed, so one statistic of a causal
// function composes with topk, comparison and arithmetic.
func funcStatistic(ctx context.Context, c *query.Call) (promql.Vector, annotations.Annotations, error) {
	v, err := c.Vector(ctx, 0)
	if err != nil {
		return nil, nil, err
	}
	name, err := c.String(1)
	if err != nil {
		return nil, nil, err
	}
	var out promql.Vector
	for _, s := range v {
		if s.Metric.Get("statistic") != name {
			continue
		}
		b := labels.NewBuilder(s.Metric)
		b.Del("statistic")
		out = append(out, promql.Sample{Metric: b.Labels(), T: c.T.UnixMilli(), F: s.F, H: s.H})
	}
	return out, nil, nil
}
