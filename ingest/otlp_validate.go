package ingest

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/tailroot/tailroot/internal/validation"
)

// Labels the translator adds to a data point's attributes at most:
// __name__, job, instance, and le or quantile.
const otlpAddedLabels = 4

// checkOTLP removes, before translation, the data points that break the
// rules every ingest path shares, and reports them in bad: too many labels,
// a label name or value too long or not UTF-8, a timestamp beyond int64.
// Checking here, not only on the translated series, keeps a data point
// with 100,001 attributes from costing the translator seconds, and keeps a
// timestamp from wrapping to 1915 in the translator's conversion. A
// resource whose attributes break the rules (they become target_info's
// labels) is removed with all its data points.
func (h *OTLPMetrics) checkOTLP(md pmetric.Metrics, bad *badList) {
	rules := h.opts.Rules
	promoted := len(h.opts.PromoteResourceAttributes)
	md.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		res := rm.Resource().Attributes()
		if h.opts.PromoteAllResourceAttributes {
			promoted = res.Len()
		}
		if err := checkAttrs(res, rules, otlpAddedLabels); err != nil {
			n := 0
			sms := rm.ScopeMetrics()
			for i := range sms.Len() {
				ms := sms.At(i).Metrics()
				for j := range ms.Len() {
					n += pointCount(ms.At(j))
				}
			}
			h.rejected.WithLabelValues("invalid_labels").Add(float64(n))
			bad.count += n - 1
			bad.add("resource with %d data points: attributes: %v", n, err)
			return true
		}
		sms := rm.ScopeMetrics()
		for i := range sms.Len() {
			ms := sms.At(i).Metrics()
			ms.RemoveIf(func(m pmetric.Metric) bool {
				if err := rules.Label("__name__", m.Name()); err != nil {
					n := pointCount(m)
					h.rejected.WithLabelValues("invalid_labels").Add(float64(n))
					bad.count += n - 1
					bad.add("metric %.64q: %v", m.Name(), err)
					return true
				}
				check := func(attrs pcommon.Map, ts, start pcommon.Timestamp) bool {
					err := checkAttrs(attrs, rules, otlpAddedLabels+promoted)
					reason := "invalid_labels"
					if err == nil {
						if _, err = validation.UnixNano(uint64(ts)); err == nil {
							_, err = validation.UnixNano(uint64(start))
						}
						reason = "invalid_timestamp"
					}
					if err != nil {
						h.rejected.WithLabelValues(reason).Inc()
						bad.add("metric %s data point: %v", m.Name(), err)
						return true
					}
					return false
				}
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					m.Gauge().DataPoints().RemoveIf(func(p pmetric.NumberDataPoint) bool {
						return check(p.Attributes(), p.Timestamp(), p.StartTimestamp())
					})
				case pmetric.MetricTypeSum:
					m.Sum().DataPoints().RemoveIf(func(p pmetric.NumberDataPoint) bool {
						return check(p.Attributes(), p.Timestamp(), p.StartTimestamp())
					})
				case pmetric.MetricTypeHistogram:
					m.Histogram().DataPoints().RemoveIf(func(p pmetric.HistogramDataPoint) bool {
						return check(p.Attributes(), p.Timestamp(), p.StartTimestamp())
					})
				case pmetric.MetricTypeExponentialHistogram:
					m.ExponentialHistogram().DataPoints().RemoveIf(func(p pmetric.ExponentialHistogramDataPoint) bool {
						return check(p.Attributes(), p.Timestamp(), p.StartTimestamp())
					})
				case pmetric.MetricTypeSummary:
					m.Summary().DataPoints().RemoveIf(func(p pmetric.SummaryDataPoint) bool {
						return check(p.Attributes(), p.Timestamp(), p.StartTimestamp())
					})
				}
				return false
			})
		}
		return false
	})
}

// checkAttrs applies the label rules to attributes that become labels,
// extra being the labels added to them. It looks at no more attributes than
// the limit allows, so a map of 100,001 is refused at its length.
func checkAttrs(attrs pcommon.Map, rules validation.Rules, extra int) error {
	if err := rules.Count(attrs.Len() + extra); err != nil {
		return err
	}
	var err error
	attrs.Range(func(k string, v pcommon.Value) bool {
		err = rules.Label(k, v.AsString())
		return err == nil
	})
	return err
}

func pointCount(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}

// otlpLabelsError is the message of a translated series that breaks the
// rules (the translator can add labels the attributes did not show).
func otlpLabelsError(err error) error { return fmt.Errorf("invalid labels: %w", err) }
