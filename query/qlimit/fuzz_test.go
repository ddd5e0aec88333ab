package qlimit

import (
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/prometheus/promql/parser"
)

// FuzzCheckExpansion feeds arbitrary queries to the pre-parse checks. They
// must never panic, and a query CheckExpansion accepts under a small size
// limit must expand, in metricsql, to at most twice that many tokens: the
// estimate may not be beaten by the real expansion.
func FuzzCheckExpansion(f *testing.F) {
	for _, s := range []string{
		"WITH (a = x, b = a + a) b * b",
		"WITH (f(x) = x + x) f(f(f(m)))",
		`WITH (c = {job="a"}) rate(m{c}[5m])`,
		"WITH (x = WITH (y = 1) y + y) x",
		`sum by (le) (rate(x_bucket{a=~"b|c"}[5m]))`,
		"ru(a, b) + ttf(c)",
		"((((", ")))", `"unterminated`, "WITH (", "with(a=1,a=a+a,a=a+a)a",
	} {
		f.Add(s)
	}
	l := Limits{MaxLength: 4096, MaxSize: 200, MaxDepth: 16}
	f.Fuzz(func(t *testing.T, q string) {
		_ = Check(q, l)
		if err := CheckExpansion(q, l); err != nil {
			return
		}
		e, err := metricsql.Parse(q)
		if err != nil {
			return
		}
		n := 0
		scan(string(e.AppendString(nil)), func(token) bool { n++; return true })
		if n > 2*l.MaxSize+16 {
			t.Fatalf("accepted %q (estimate within %d tokens), metricsql expands it to %d", q, l.MaxSize, n)
		}
	})
}

// FuzzParser checks that the limited parser never panics and refuses
// every expression deeper than its limit.
func FuzzParser(f *testing.F) {
	for _, s := range []string{"a+b*c", "sum(rate(x[5m]))", strings.Repeat("a+", 40) + "a", "((a))"} {
		f.Add(s)
	}
	p := Parser{Parser: parser.NewParser(parser.Options{}), Limits: Limits{MaxLength: 4096, MaxSize: 500, MaxDepth: 12}}
	raw := parser.NewParser(parser.Options{})
	f.Fuzz(func(t *testing.T, q string) {
		e, err := p.ParseExpr(q)
		if err != nil {
			return
		}
		full, err := raw.ParseExpr(q)
		if err != nil {
			t.Fatalf("limited parser accepted %q, the parser refuses it: %v", q, err)
		}
		if d := depth(full, 1, 1<<30); d > 12 {
			t.Fatalf("accepted %q of depth %d", q, d)
		}
		_ = e
	})
}
