package tailfn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/query"
)

// breakdownOf computes one breakdown of the records of a window.
type breakdownOf func(reqs attribution.Requests, p float64) (attribution.Breakdown, kinds, error)

func tailMeanBreakdown(reqs attribution.Requests, p float64) (attribution.Breakdown, kinds, error) {
	b, err := attribution.TailMean(reqs, p)
	return b, recordKinds, err
}

func eulerBreakdown(reqs attribution.Requests, p float64) (attribution.Breakdown, kinds, error) {
	b, err := attribution.Euler(reqs, p, attribution.EulerOptions{})
	return b, eulerKinds, err
}

func excessBreakdown(reqs attribution.Requests, p float64) (attribution.Breakdown, kinds, error) {
	b, err := attribution.Excess(reqs, p)
	return b, recordKinds, err
}

// breakdownFn implements f(p, requests[w] [, statistic]).
func breakdownFn(f breakdownOf) impl {
	return func(ctx context.Context, c *query.Call, src RecordSource) (promql.Vector, annotations.Annotations, error) {
		p, err := levelArg(ctx, c, 0, "p")
		if err != nil {
			return nil, nil, err
		}
		sel, err := statisticArg(c, 2, "contribution", breakdownStats)
		if err != nil {
			return nil, nil, err
		}
		var annos annotations.Annotations
		pop, _, err := loadArg(ctx, c, src, 1, "requests", &annos)
		if err != nil || pop.Requests.Len() == 0 {
			return nil, annos, err
		}
		b, k, err := f(pop.Requests, p)
		if err != nil {
			return warnData(c, annos, err)
		}
		o := newRows(c)
		emitBreakdown(o, b, k, sel, float64(pop.Requests.Len()))
		return o.vec, annos, nil
	}
}

// tailShapley implements tail_shapley(p, now[w], baseline[w] [, statistic]).
func tailShapley(ctx context.Context, c *query.Call, src RecordSource) (promql.Vector, annotations.Annotations, error) {
	p, err := levelArg(ctx, c, 0, "p")
	if err != nil {
		return nil, nil, err
	}
	allowed := append([]string{"baseline", "all_reverted"}, breakdownStats...)
	sel, err := statisticArg(c, 3, "contribution", allowed)
	if err != nil {
		return nil, nil, err
	}
	var annos annotations.Annotations
	now, _, err := loadArg(ctx, c, src, 1, "requests now", &annos)
	if err != nil {
		return nil, annos, err
	}
	base, _, err := loadArg(ctx, c, src, 2, "baseline requests", &annos)
	if err != nil || now.Requests.Len() == 0 || base.Requests.Len() == 0 {
		return nil, annos, err
	}
	res, err := attribution.Shapley(now.Requests, base.Requests, p)
	if err != nil {
		return warnData(c, annos, err)
	}
	o := newRows(c)
	emitBreakdown(o, res.Breakdown, recordKinds, sel, float64(now.Requests.Len()))
	m := res.Method.String()
	if sel == "all" || sel == "baseline" {
		o.stat(res.Baseline, StageE2E, m, attribution.KindExact, "baseline")
	}
	if sel == "all" || sel == "all_reverted" {
		o.stat(res.AllReverted, StageE2E, m, attribution.KindExact, "all_reverted")
	}
	return o.vec, annos, nil
}

// heatStats are the statistic values tail_heat accepts.
var heatStats = []string{"share", "mean", "count", "from", "to", "top"}

// tailHeat implements tail_heat(requests[w] [, statistic [, levels]]).
func tailHeat(ctx context.Context, c *query.Call, src RecordSource) (promql.Vector, annotations.Annotations, error) {
	sel, err := statisticArg(c, 1, "share", heatStats)
	if err != nil {
		return nil, nil, err
	}
	lv, err := optString(c, 2, "")
	if err != nil {
		return nil, nil, err
	}
	var bands []attribution.Band
	if lv != "" {
		if bands, err = ParseLevels(lv); err != nil {
			return nil, nil, argError(c, 2, "levels", err)
		}
	}
	var annos annotations.Annotations
	pop, _, err := loadArg(ctx, c, src, 0, "requests", &annos)
	if err != nil || pop.Requests.Len() == 0 {
		return nil, annos, err
	}
	h, err := attribution.HeatTable(pop.Requests, bands)
	if err != nil {
		return warnData(c, annos, err)
	}
	o := newRows(c)
	emitHeat(o, h, sel)
	return o.vec, annos, nil
}

// MethodHeat is the method label of heat-table rows.
const MethodHeat = "heat_table"

func emitHeat(o *rows, h attribution.Heat, sel string) {
	want := func(s string) bool { return sel == "all" || sel == s }
	exact := attribution.KindExact.String()
	row := func(v float64, band, stage, statistic string) {
		o.add(v, LabelBand, band, LabelStage, stage, LabelMethod, MethodHeat, LabelKind, exact, LabelStatistic, statistic)
	}
	for _, r := range h.Rows {
		band := r.Band.String()
		for j, st := range h.Stages {
			if want("share") {
				row(ratio(r.StageMean[j], r.MeanS), band, st, "share")
			}
			if want("mean") {
				row(r.StageMean[j], band, st, "mean")
			}
		}
		if want("mean") {
			row(r.MeanS, band, StageE2E, "mean")
		}
		if want("count") {
			row(float64(r.Count), band, StageE2E, "count")
		}
		if want("from") {
			row(r.From, band, StageE2E, "from")
		}
		if want("to") {
			row(r.To, band, StageE2E, "to")
		}
		if want("top") && r.Top >= 0 {
			row(r.TopShare, band, r.TopStage, "top")
		}
	}
}

// ParseLevels parses tail_heat's levels argument, increasing quantile
// levels separated by commas ("0.5,0.9,0.99"), into consecutive bands
// [l_0, l_1), …, [l_{m−1}, 1]: the last band is open-ended and keeps the
// maximum. Levels must lie in [0, 1) and increase strictly.
func ParseLevels(s string) ([]attribution.Band, error) {
	parts := strings.Split(s, ",")
	lv := make([]float64, 0, len(parts)+1)
	for i, f := range parts {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, fmt.Errorf("level %d: %q is not a number", i+1, strings.TrimSpace(f))
		}
		if !(v >= 0 && v < 1) {
			return nil, fmt.Errorf("level %d: %v is outside [0, 1)", i+1, v)
		}
		if i > 0 && v <= lv[i-1] {
			return nil, fmt.Errorf("level %d: %v does not increase on %v", i+1, v, lv[i-1])
		}
		lv = append(lv, v)
	}
	lv = append(lv, 1)
	bands := make([]attribution.Band, len(lv)-1)
	for i := range bands {
		bands[i] = attribution.Band{Lo: lv[i], Hi: lv[i+1]}
	}
	return bands, nil
}

// DefaultCIMethod is the interval method when a query names none: the
// distribution-free order-statistic interval, whose coverage is at least
// nominal wherever it exists (docs/functions.md has the coverage table).
const DefaultCIMethod = "order_statistic"

// ParseCIMethod maps a CI method argument to attribution's:
// "order_statistic" (or "os"), "bootstrap", "maritz_jarrett" (or "mj"),
// "delta" (or "delta_kde").
func ParseCIMethod(s string) (attribution.CIMethod, error) {
	switch s {
	case "order_statistic", "os":
		return attribution.CIOrderStatistic, nil
	case "bootstrap":
		return attribution.CIBootstrap, nil
	case "maritz_jarrett", "mj":
		return attribution.CIMaritzJarrett, nil
	case "delta", "delta_kde":
		return attribution.CIDeltaKDE, nil
	}
	return 0, fmt.Errorf("%q is not one of order_statistic, bootstrap, maritz_jarrett, delta", s)
}

// ciOptions reads the optional method argument at i.
func ciOptions(c *query.Call, i int) (attribution.CIOptions, error) {
	s, err := optString(c, i, DefaultCIMethod)
	if err != nil {
		return attribution.CIOptions{}, err
	}
	m, err := ParseCIMethod(s)
	if err != nil {
		return attribution.CIOptions{}, argError(c, i, "method", err)
	}
	return attribution.CIOptions{Method: m, Seed: BootstrapSeed}, nil
}

// fieldArg reads the optional field argument at i.
func fieldArg(c *query.Call, i int) (string, error) {
	f, err := optString(c, i, "e2e")
	if err != nil {
		return "", err
	}
	if err := CheckField(f); err != nil {
		return "", argError(c, i, "field", err)
	}
	return f, nil
}

// quantileCI implements quantile_ci(p, level, requests[w] [, method [, field]]).
func quantileCI(ctx context.Context, c *query.Call, src RecordSource) (promql.Vector, annotations.Annotations, error) {
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
	var annos annotations.Annotations
	pop, _, err := loadArg(ctx, c, src, 2, "requests", &annos)
	if err != nil || pop.Requests.Len() == 0 {
		return nil, annos, err
	}
	x, _ := pop.Field(field)
	iv, err := attribution.QuantileCI(x, p, level, opts)
	if err != nil {
		return ciError(c, annos, err)
	}
	o := newRows(c)
	m := iv.Method.String()
	o.stat(iv.Estimate, field, m, attribution.KindExact, "quantile")
	o.stat(iv.Lower, field, m, attribution.KindEstimate, "lower")
	o.stat(iv.Upper, field, m, attribution.KindEstimate, "upper")
	o.stat(iv.SE, field, m, attribution.KindEstimate, "se")
	o.stat(float64(len(x)), field, m, attribution.KindExact, "requests")
	return o.vec, annos, nil
}

// quantileDiffCI implements
// quantile_diff_ci(p, level, a[w], b[w] [, method [, field]]): the interval
// of P_p(b) − P_p(a).
func quantileDiffCI(ctx context.Context, c *query.Call, src RecordSource) (promql.Vector, annotations.Annotations, error) {
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
	var annos annotations.Annotations
	pa, _, err := loadArg(ctx, c, src, 2, "requests a", &annos)
	if err != nil {
		return nil, annos, err
	}
	pb, _, err := loadArg(ctx, c, src, 3, "requests b", &annos)
	if err != nil || pa.Requests.Len() == 0 || pb.Requests.Len() == 0 {
		return nil, annos, err
	}
	xa, _ := pa.Field(field)
	xb, _ := pb.Field(field)
	iv, err := attribution.QuantileDiffCI(xb, xa, p, level, opts)
	if err != nil {
		return ciError(c, annos, err)
	}
	o := newRows(c)
	m := iv.Method.String()
	o.stat(attribution.Quantile(xa, p), field, m, attribution.KindExact, "a")
	o.stat(attribution.Quantile(xb, p), field, m, attribution.KindExact, "b")
	o.stat(iv.Estimate, field, m, attribution.KindExact, "diff")
	o.stat(iv.Lower, field, m, attribution.KindEstimate, "lower")
	o.stat(iv.Upper, field, m, attribution.KindEstimate, "upper")
	o.stat(iv.SE, field, m, attribution.KindEstimate, "se")
	return o.vec, annos, nil
}

// ciError turns an interval error into the function's answer: a method
// refused at this p and n (attribution.ErrInvalidMethod) fails the query,
// naming method, p and n, so that no interval below its nominal coverage
// is ever returned; other data errors (too few values) are a warning and
// no result.
func ciError(c *query.Call, annos annotations.Annotations, err error) (promql.Vector, annotations.Annotations, error) {
	if errors.Is(err, attribution.ErrInvalidMethod) {
		return nil, annos, fmt.Errorf("%s: %w", c.Func.Name, err)
	}
	return warnData(c, annos, err)
}
