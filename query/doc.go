// Package query evaluates PromQL with the upstream Prometheus engine, extended
// by a registry of tailroot functions and fronted by a MetricsQL translator.
//
// In: a query string (PromQL or MetricsQL), a time or range, and a
// storage.Queryable. Out: promql.Query values whose results the API encodes
// exactly as Prometheus does.
//
// Invariants: a query the PromQL parser accepts is evaluated unchanged by the
// upstream engine, or, for the instant and range queries query/fast compiles
// (Options.Engine "fast", the default), by that package with bitwise the
// same answers — it hands a query back to the upstream engine whenever it
// meets what it does not take (native histograms, start timestamps, a
// sample budget near MaxSamples), and concurrency and the timeout bound
// both alike; only a query PromQL rejects and MetricsQL accepts is
// translated — only for a caller that opted in (WithMetricsQL, or
// Options.MetricsQL) — and anything else returns the PromQL parse error. A
// planned function's result carries the annotations of the argument queries
// it evaluated (a remote store that failed, a histogram warning) as well as
// its own.
//
// Planned functions (Registry.RegisterPlanned) run above the engine: the
// planner finds their calls in the parsed expression, evaluates each one
// step by step into an overlay of series, replaces the calls in the parsed
// tree by selectors of those series, and hands the rewritten tree (as
// text) to the upstream engine. A registry never writes the engine's
// global promql.FunctionCalls.
//
// Cost is bounded before anything runs: Options.Limits (query/qlimit) refuse
// a query over its length, token count or nesting depth before it is
// parsed, and a MetricsQL query whose WITH templates would expand past the
// same size or depth before metricsql expands them (its expansion is
// exponential in the nesting of templates). Translation runs under the
// query timeout and the caller's context; infos quote at most 1 KiB of a
// translation.
package query
