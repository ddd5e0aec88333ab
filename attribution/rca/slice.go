package rca

import (
	"math"
	"strings"
)

// A fleet-level target is often an aggregate across hosts (the fleet's
// mean TTFT), and its candidates include the same metric per host: the
// target's slices. A fault on one host moves that host's slice by about
// twice as much as the aggregate, relative to its mean (a 15 % surge on
// one of two hosts moves its TTFT by 6–10 % and the fleet's by 3–5 %),
// while the load's own wander moves every slice alike. When a root cause
// corroborates a weak change of the target (corroborates), the question
// "did the target move where the cause stepped?" is therefore also asked
// of the target's slice on the cause's own host: the host is the cause's,
// not searched for, so it is one more test, not one per host, and the
// two are held to a Bonferroni share of the pointwise level (sliceZ).
//
// The slice only localises the change being ranked: it is asked when the
// cause's split lies within stepWindow (five minutes) of that change. A
// host's load wanders by as much as a mild surge, and an engine state that
// follows it (the KV-cache usage) steps with that host's TTFT far from
// where the fleet moved; asked there, the slice would move the incident
// to a wander the fleet does not show.

// sliceZ is the bar on the pointwise shift statistic when the fleet
// target or its slice on the cause's host may show the move: the
// one-sided 2.5 % point (1.96), each of the two tests at half the 5 %
// that weakZ allows one; two-sided (2.24) when either direction counts.
func sliceZ(dir Direction) float64 {
	if dir.sign() != 0 {
		return weakTargetZ
	}
	return 2.241402727604947 // the two-sided 2.5 % point
}

// targetMetric is the metric whose per-group series are the target's
// slices: opts.TargetMetric, or the metric name target's name starts
// with (up to "{", a space or its end; "" for an expression such as
// "sum(rate(…))", whose slices Rank cannot know).
func targetMetric(name string, opts Options) string {
	if opts.TargetMetric != "" {
		return opts.TargetMetric
	}
	end := strings.IndexAny(name, "{ ")
	if end < 0 {
		end = len(name)
	}
	m := name[:end]
	if m == "" || strings.ContainsAny(m, "()[]") {
		return ""
	}
	for i, r := range m {
		if !(r == '_' || r == ':' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return ""
		}
	}
	return m
}

// sliceOf returns the values of the target's slice in candidate i's group
// (a candidate of metric, other than i, whose group is i's and not
// empty), or nil when there is none or more than one.
func sliceOf(cands []Candidate, groups []string, metric string, i int) []float64 {
	if metric == "" || groups[i] == "" {
		return nil
	}
	var out []float64
	for j, c := range cands {
		if j == i || c.Metric != metric || groups[j] != groups[i] {
			continue
		}
		if out != nil {
			return nil // two series of the metric on one host: not a slice
		}
		out = c.Values
	}
	return out
}

// movedAt reports whether x moved the harmful way at k with pointwise
// rank-based |z| ≥ bar, in the direction of sign (the target's change).
func movedAt(x []float64, k int, bar, sign float64, dir Direction) bool {
	xr := ranks(x)
	sh, z := newCumsum(xr).shiftZ(xr, k)
	return math.Abs(z) >= bar && sh*sign > 0 && dir.harmful(sh)
}
