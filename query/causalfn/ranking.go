package causalfn

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/attribution/causal"
	"github.com/tailroot/tailroot/attribution/rca"
	"github.com/tailroot/tailroot/query"
)

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

// loadRanking evaluates the target and the candidates of a ranking
// function and ranks them with RootCause, the implementation the rootcause
// endpoint uses.
func loadRanking(ctx context.Context, c *query.Call) (*RootCauseResult, annotations.Annotations, error) {
	t, err := oneArg(ctx, c, arg{0, "target"})
	if err != nil {
		return nil, nil, err
	}
	var cands []Input
	for i := 1; i < len(c.Args); i++ {
		cs, err := matrixArg(ctx, c, arg{i, "candidates"})
		if err != nil {
			return nil, nil, err
		}
		for _, s := range cs {
			cands = append(cands, Input{Labels: s.labels, Family: s.family, T: s.t, V: s.v})
		}
	}
	res, err := RootCause(Input{Labels: t.labels, Family: t.family, T: t.t, V: t.v}, cands, RootCauseOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.Func.Name, err)
	}
	annos := annotations.Annotations{}
	for _, w := range res.Warnings {
		annos.Add(fmt.Errorf("%w: %s: %s", annotations.PromQLWarning, c.Func.Name, w))
	}
	for _, w := range res.Infos {
		annos.Add(fmt.Errorf("%w: %s: %s", annotations.PromQLInfo, c.Func.Name, w))
	}
	if len(annos) == 0 {
		annos = nil
	}
	return res, annos, nil
}

// byName indexes a ranking's aligned candidates.
func byName(cs []rca.Candidate) map[string]*rca.Candidate {
	out := make(map[string]*rca.Candidate, len(cs))
	for i := range cs {
		out[cs[i].Name] = &cs[i]
	}
	return out
}

// add appends one statistic of candidate c, labelled as result.add does.
func (r *result) addCand(c *rca.Candidate, f float64, pairs ...string) {
	b := labels.NewBuilder(labels.FromMap(c.Labels))
	b.Del(model.MetricNameLabel)
	b.Set("candidate", c.Name)
	for i := 0; i+1 < len(pairs); i += 2 {
		b.Set(pairs[i], pairs[i+1])
	}
	r.vec = append(r.vec, promql.Sample{Metric: b.Labels(), T: r.t, F: f})
}

// funcRobustScore: robust_score(target, candidates…): plain BARO at the
// change point root_cause uses.
func funcRobustScore(ctx context.Context, c *query.Call) (promql.Vector, annotations.Annotations, error) {
	rk, annos, err := loadRanking(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	res := &result{t: c.T.UnixMilli()}
	idx := byName(rk.Candidates)
	for k, sc := range rk.Baseline {
		x := idx[sc.Name]
		res.addCand(x, sc.Score, "statistic", "score")
		res.addCand(x, float64(k+1), "statistic", "rank")
		res.addCand(x, float64(rk.T[rk.ChangePoint])/1000, "statistic", "change_time")
	}
	sortStats(res.vec)
	return res.vec, annos, nil
}

// funcRootCause: root_cause(target, candidates…): RootCause.
func funcRootCause(ctx context.Context, c *query.Call) (promql.Vector, annotations.Annotations, error) {
	rk, annos, err := loadRanking(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	if len(rk.Candidates) == 0 {
		return nil, annos, nil
	}
	res := &result{t: c.T.UnixMilli()}
	idx := byName(rk.Candidates)
	for _, x := range rk.Ranking {
		s := idx[x.Name]
		node := x.Node
		if node == "" {
			node = "unmapped"
		}
		add := func(stat string, f float64) { res.addCand(s, f, "statistic", stat, "node", node) }
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
		add("change_time", float64(rk.T[rk.ChangePoint])/1000)
	}
	// The verdict: one sample without a candidate, valued at the change
	// time, whose verdict label is "incident", "no incident" or
	// "unexplained", direction the harmful direction it used and reason
	// rca.Result.Why: one word from a short list ("improved", "no change",
	// …), so a range query's verdict keeps few series where the words of
	// rca.Result.VerdictReason, with their numbers, would make one a step.
	res.vec = append(res.vec, promql.Sample{
		Metric: labels.FromStrings("statistic", "verdict", "verdict", rk.Verdict, "direction", string(rk.Direction), "reason", rk.Why),
		T:      res.t, F: float64(rk.T[rk.ChangePoint]) / 1000,
	})
	sortStats(res.vec)
	return res.vec, annos, nil
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
