// Package qlimit bounds what a query string may cost before it is
// evaluated: its length, its size in tokens and its nesting depth, checked
// before parsing (Check) and, for depth, on the parsed tree (CheckExpr);
// and what expanding MetricsQL WITH templates would produce, computed as
// numbers before metricsql expands anything (CheckExpansion).
//
// In: a query string and Limits. Out: nil or an *Error naming the limit as
// its serve flag does (query.max-length, query.max-size, query.max-depth),
// its value and what the query has. Parser wraps a parser.Parser so every
// caller of the engine's parser gets the checks.
//
// Invariants: every check costs at most one pass over the query (plus, for
// CheckExpansion, work bounded by the size limit), never panics, and
// allocates nothing for plain PromQL; a query CheckExpansion accepts
// expands in metricsql to no more than about twice the size limit
// (FuzzCheckExpansion, TestExpansionEstimate).
package qlimit
