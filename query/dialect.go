package query

import (
	"time"

	"github.com/tailroot/tailroot/query/metricsql"
)

// translateMetricsQL returns the PromQL form of a query the PromQL parser
// rejected, parsed with the same function set and feature flags as the
// engine, or an error when it is not MetricsQL or has no exact PromQL form.
func (e *Engine) translateMetricsQL(qs string, step time.Duration) (string, error) {
	return metricsql.Translate(qs, metricsql.Options{
		Functions:                   e.funcs,
		EnableExperimentalFunctions: e.opts.ExperimentalFunctions,
		EnableBinopFillModifiers:    e.opts.BinopFillModifiers,
		EnableUnquotedUTF8Names:     e.opts.UnquotedUTF8Names,
		Step:                        step,
		Limits:                      e.opts.Limits,
	})
}
