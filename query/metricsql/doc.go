// Package metricsql translates MetricsQL queries into PromQL text that the
// upstream Prometheus engine evaluates.
//
// In: a query string that github.com/VictoriaMetrics/metricsql accepts, plus
// Options describing the target PromQL parser (its function set and
// experimental switches) and the query step. Out: PromQL text that
// parser.NewParser(opts.ParserOptions()) accepts, or an error.
//
// Invariants:
//   - Translate is pure: no storage, no clock, no global state. The same
//     query and Options always give the same text.
//   - Every string Translate returns has been parsed by the target PromQL
//     parser before it is returned.
//   - A construct is translated only when the PromQL output means the same
//     thing as the MetricsQL input under PromQL's evaluation rules; anything
//     else returns an *UnsupportedError (errors.Is(err, ErrUnsupported)) that
//     names the construct. docs/metricsql.md lists every translation and the
//     known differences from VictoriaMetrics' own evaluator.
//   - Translate never panics, whatever the input (FuzzTranslate).
//
// Functions that exist in both dialects keep their PromQL meaning: a query
// that mixes MetricsQL syntax with rate() gets Prometheus' rate(), exactly as
// the same query without the MetricsQL syntax would.
package metricsql
