package causalfn

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/attribution/rca"
)

// CandidateQuery is a PromQL expression whose series are root-cause
// candidates. Metric names what the series measure when the expression
// drops the metric name (rate, sum); Node, when set, overrides the
// candidate's graph node (see rca.NodeFor).
type CandidateQuery struct {
	Metric, Node, Query string
	// Kind says how Discover read the family: counter (rate), gauge
	// (value), histogram or summary (mean of _sum over _count).
	Kind string
}

// MetricType returns a family's type from its metadata ("counter",
// "gauge", "histogram", "summary", …), "" when unknown.
type MetricType func(family string) string

// DiscoverOptions configures Discover.
type DiscoverOptions struct {
	// Types gives families' metadata types; nil = by name only.
	Types MetricType
	// MaxFamilies bounds the families turned into candidates, known
	// families (rca.NodeFor maps them) first. 0 = 300.
	MaxFamilies int
	// MaxSeriesPerFamily leaves out a family with more series in the
	// window (after dropping the per-CPU label), with a note. 0 = 64.
	MaxSeriesPerFamily int
}

// Discover lists root-cause candidates from what is stored between start
// and end: every metric family, read by its metadata type or, without
// one, by its name (…_total: counter; …_sum with …_count: histogram or
// summary; …_bucket, …_created and summary quantiles are never
// candidates themselves). Counters become 1-minute rates, histograms and
// summaries 1-minute means (rate of _sum over rate of _count), gauges
// their value, all keeping every label but a per-CPU "cpu" (summed, or
// averaged for gauges). Families the serving graph knows (rca.NodeFor:
// vLLM, SGLang, TGI, Triton, tailroot-agent, dcgm-exporter,
// node-exporter, cAdvisor) come first; unknown ones take part as unmapped
// candidates. With vLLM's TTFT, queue and prefill histograms present, the
// frontend residual (TTFT − queue − prefill) per instance is added on the
// tokenize node. The notes say what was left out and why.
func Discover(ctx context.Context, q storage.Queryable, start, end time.Time, opts DiscoverOptions) ([]CandidateQuery, []string, error) {
	if opts.MaxFamilies <= 0 {
		opts.MaxFamilies = 300
	}
	if opts.MaxSeriesPerFamily <= 0 {
		opts.MaxSeriesPerFamily = 64
	}
	// Five minutes before start: the lookback of the first point.
	qr, err := q.Querier(start.Add(-5*time.Minute).UnixMilli(), end.UnixMilli())
	if err != nil {
		return nil, nil, fmt.Errorf("discover candidates: %w", err)
	}
	defer qr.Close()
	names, _, err := qr.LabelValues(ctx, model.MetricNameLabel, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("discover candidates: list metric names: %w", err)
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	typeOf := func(fam string) string {
		if opts.Types != nil {
			if t := opts.Types(fam); t != "" && t != "unknown" {
				return t
			}
		}
		return ""
	}
	var notes []string
	type fam struct {
		name, kind string
		known      bool
	}
	var fams []fam
	seen := map[string]bool{}
	for _, n := range names {
		var f fam
		switch {
		case strings.HasSuffix(n, "_bucket") && have[strings.TrimSuffix(n, "_bucket")+"_count"],
			strings.HasSuffix(n, "_created"):
			continue
		case strings.HasSuffix(n, "_sum") && have[strings.TrimSuffix(n, "_sum")+"_count"]:
			f = fam{name: strings.TrimSuffix(n, "_sum"), kind: "histogram"}
		case strings.HasSuffix(n, "_count") && have[strings.TrimSuffix(n, "_count")+"_sum"]:
			continue
		default:
			f = fam{name: n, kind: "gauge"}
			switch t := typeOf(n); {
			case t == "counter" || (t == "" && strings.HasSuffix(n, "_total")):
				f.kind = "counter"
			case t == "histogram" || t == "summary" || t == "gaugehistogram":
				continue // native histograms: pass floats
			}
		}
		if seen[f.name] {
			continue
		}
		seen[f.name] = true
		_, f.known = rca.NodeFor(f.name, nil)
		fams = append(fams, f)
	}
	slices.SortStableFunc(fams, func(a, b fam) int {
		switch {
		case a.known == b.known:
			return 0
		case a.known:
			return -1
		}
		return 1
	})
	if len(fams) > opts.MaxFamilies {
		notes = append(notes, fmt.Sprintf("%d metric families left out of the candidates: over the limit of %d (name candidates to choose)", len(fams)-opts.MaxFamilies, opts.MaxFamilies))
		fams = fams[:opts.MaxFamilies]
	}
	var out []CandidateQuery
	for _, f := range fams {
		sel := f.name
		if f.kind == "histogram" {
			sel = f.name + "_count"
		}
		n, err := countSeries(ctx, qr, sel, opts.MaxSeriesPerFamily+1)
		if err != nil {
			return nil, nil, fmt.Errorf("discover candidates: %w", err)
		}
		if n > opts.MaxSeriesPerFamily {
			notes = append(notes, fmt.Sprintf("candidate family %s left out: more than %d series (name it in candidates, aggregated)", f.name, opts.MaxSeriesPerFamily))
			continue
		}
		if n == 0 {
			continue
		}
		var expr string
		switch f.kind {
		case "counter":
			expr = fmt.Sprintf("sum without (cpu) (rate(%s[1m]))", quoteName(f.name))
		case "histogram":
			expr = meanQuery(f.name, "sum without (cpu, le, quantile)")
		default:
			if q, _ := countQuantile(ctx, qr, f.name); q {
				continue // a summary's quantiles: the mean stands for it
			}
			expr = fmt.Sprintf("avg without (cpu) (%s)", quoteName(f.name))
		}
		out = append(out, CandidateQuery{Metric: f.name, Query: expr, Kind: f.kind})
	}
	if have["vllm:time_to_first_token_seconds_sum"] && have["vllm:request_queue_time_seconds_sum"] && have["vllm:request_prefill_time_seconds_sum"] {
		agg := "sum by (instance)"
		out = append(out, CandidateQuery{
			Metric: "frontend_residual_seconds", Node: "tokenize", Kind: "derived",
			Query: meanQuery("vllm:time_to_first_token_seconds", agg) + " - (" + meanQuery("vllm:request_queue_time_seconds", agg) +
				") - (" + meanQuery("vllm:request_prefill_time_seconds", agg) + ")",
		})
	}
	return out, notes, nil
}

// meanQuery is the 1-minute mean of histogram or summary family m.
func meanQuery(m, agg string) string {
	return fmt.Sprintf("%s (rate(%s[1m])) / %s (rate(%s[1m]))", agg, quoteName(m+"_sum"), agg, quoteName(m+"_count"))
}

// quoteName writes a metric name as a selector, quoting names PromQL's
// legacy syntax cannot hold.
func quoteName(n string) string {
	if model.LegacyValidation.IsValidMetricName(n) {
		return n
	}
	return fmt.Sprintf("{%q}", n)
}

func countSeries(ctx context.Context, qr storage.Querier, name string, limit int) (int, error) {
	ss := qr.Select(ctx, false, nil, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, name))
	keys := map[string]bool{}
	for ss.Next() {
		keys[ss.At().Labels().DropReserved(func(n string) bool { return n == model.MetricNameLabel || n == "cpu" }).String()] = true
		if len(keys) >= limit {
			break
		}
	}
	return len(keys), ss.Err()
}

// countQuantile reports whether family name's series carry a quantile
// label (a summary's quantile series).
func countQuantile(ctx context.Context, qr storage.Querier, name string) (bool, error) {
	ss := qr.Select(ctx, false, nil, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, name))
	for ss.Next() {
		return ss.At().Labels().Has("quantile"), nil
	}
	return false, ss.Err()
}
