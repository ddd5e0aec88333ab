package qlimit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/prometheus/promql/parser"
)

// nestedWith is the 22-level WITH query: each template doubles the
// previous one, so metricsql's expansion has 2^22 copies of x.
func nestedWith(levels int) string {
	var b strings.Builder
	b.WriteString("WITH (a0 = x")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, ", a%d = a%d + a%d", i, i-1, i-1)
	}
	fmt.Fprintf(&b, ") a%d", levels)
	return b.String()
}

func TestCheck(t *testing.T) {
	l := DefaultLimits()
	for _, tc := range []struct {
		name, q string
		limit   string // "" means accepted
	}{
		{"plain", `sum by (le) (rate(http_request_duration_seconds_bucket{job="api"}[5m]))`, ""},
		{"long regexp is one token", `up{instance=~"` + strings.Repeat("host-1234|", 5000) + `x"}`, ""},
		{"too long", strings.Repeat("a", l.MaxLength+1), "query.max-length"},
		{"40 KB a+a+…", strings.Repeat("a+", 20000) + "a", "query.max-size"},
		{"deep brackets", strings.Repeat("(", 200) + "a" + strings.Repeat(")", 200), "query.max-depth"},
		{"brackets inside strings do not count", `{a="` + strings.Repeat("(", 500) + `"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.q, l)
			checkLimit(t, err, tc.limit)
		})
	}
}

func checkLimit(t *testing.T, err error, limit string) {
	t.Helper()
	if limit == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var le *Error
	if !errors.As(err, &le) || le.Limit != limit {
		t.Fatalf("err = %v, want a refusal by %s", err, limit)
	}
	if !strings.Contains(err.Error(), limit+"=") {
		t.Fatalf("error %q does not name the limit and its value", err)
	}
}

func TestParserDepth(t *testing.T) {
	p := Parser{Parser: parser.NewParser(parser.Options{}), Limits: DefaultLimits()}
	// 500 operators: few tokens, one bracket level, but a tree 500 deep.
	_, err := p.ParseExpr(strings.Repeat("a+", 500) + "a")
	checkLimit(t, err, "query.max-depth")
	e, err := p.ParseExpr(strings.Repeat("a+", 100) + "a")
	if err != nil || e == nil {
		t.Fatalf("100 operators refused: %v", err)
	}
	// Parse errors stay parse errors, so the API and the MetricsQL
	// fallback see what they saw before.
	_, err = p.ParseExpr("sum(")
	var pe parser.ParseErrors
	if !errors.As(err, &pe) {
		t.Fatalf("parse error became %T %v", err, err)
	}
	if _, err := p.ParseMetricSelector(`{a="b"}`); err != nil {
		t.Fatal(err)
	}
	_, err = p.ParseMetricSelectors([]string{`{a="b"}`, strings.Repeat("{", 300)})
	checkLimit(t, err, "query.max-depth")
}

func TestCheckExpansion(t *testing.T) {
	l := DefaultLimits()
	q := nestedWith(22)
	if len(q) > 420 {
		t.Fatalf("test query is %d bytes, want the issue's ~407", len(q))
	}
	checkLimit(t, CheckExpansion(q, l), "query.max-size")

	// The same doubling through nested WITH keywords instead of a list:
	// q0 = m, qN = WITH (t = (qN-1)) t + t.
	nq := "m"
	for range 22 {
		nq = "WITH (t = (" + nq + ")) t + t"
	}
	checkLimit(t, CheckExpansion(nq, l), "query.max-size")

	// Function templates multiply too: f(f(f(…))) with f(x) = x + x.
	fq := "WITH (f(x) = x + x) " + strings.Repeat("f(", 30) + "m" + strings.Repeat(")", 30)
	checkLimit(t, CheckExpansion(fq, l), "query.max-size")

	// Deep but small: a chain of templates each using the previous once.
	var b strings.Builder
	b.WriteString("WITH (t0 = x")
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&b, ", t%d = t%d", i, i-1)
	}
	b.WriteString(") t200")
	checkLimit(t, CheckExpansion(b.String(), l), "query.max-depth")

	for _, ok := range []string{
		nestedWith(8),
		`WITH (commonFilters = {job="api"}, rate5m(m) = rate(m{commonFilters}[5m])) sum(rate5m(http_requests_total))`,
		`ru(node_memory_MemFree_bytes, node_memory_MemTotal_bytes)`,
		`WITH (x = WITH (y = 1) y + y) x * x`,
	} {
		if err := CheckExpansion(ok, l); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestExpansionEstimate compares the estimate with metricsql's real
// expansion on random template nests small enough to expand: the estimate
// must not fall below half of the tokens metricsql produces, or a query
// could slip past the limit with twice its budget.
func TestExpansionEstimate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ops := []string{"+", "*", "or", "and", "-"}
	for i := 0; i < 300; i++ {
		n := 1 + rng.IntN(8)
		var b strings.Builder
		b.WriteString("WITH (t0 = m0{job=\"a\"}, f(x, y) = x / y")
		for j := 1; j <= n; j++ {
			a, c := rng.IntN(j), rng.IntN(j)
			op := ops[rng.IntN(len(ops))]
			if rng.IntN(3) == 0 {
				fmt.Fprintf(&b, ", t%d = f(t%d, rate(t%d[5m]))", j, a, c)
			} else {
				fmt.Fprintf(&b, ", t%d = t%d %s sum(t%d)", j, a, op, c)
			}
		}
		fmt.Fprintf(&b, ") t%d", n)
		q := b.String()
		e, err := metricsql.Parse(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		real := 0
		scan(string(e.AppendString(nil)), func(token) bool { real++; return true })
		x := &expander{limits: Limits{}, memo: map[string]int{}}
		est, err := x.size(tree(q), builtinScope(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if 2*est < real {
			t.Fatalf("%s: estimate %d tokens, metricsql expands to %d", q, est, real)
		}
	}
}

func BenchmarkCheckExpansionNested(b *testing.B) {
	q := nestedWith(22)
	l := DefaultLimits()
	b.ReportAllocs()
	for b.Loop() {
		if CheckExpansion(q, l) == nil {
			b.Fatal("accepted")
		}
	}
}

func BenchmarkCheck40KB(b *testing.B) {
	q := strings.Repeat("a+", 20000) + "a"
	l := DefaultLimits()
	b.ReportAllocs()
	for b.Loop() {
		if Check(q, l) == nil {
			b.Fatal("accepted")
		}
	}
}

// BenchmarkFormatAtDepthLimit is what format_query costs for the deepest
// expression the default limits let through: a chain of 127 operators
// (depth 128). Printing is quadratic in depth upstream, so this is the
// bound the depth limit buys.
func BenchmarkFormatAtDepthLimit(b *testing.B) {
	p := Parser{Parser: parser.NewParser(parser.Options{}), Limits: DefaultLimits()}
	q := strings.Repeat("a+", 127) + "a"
	b.ReportAllocs()
	for b.Loop() {
		e, err := p.ParseExpr(q)
		if err != nil {
			b.Fatal(err)
		}
		_ = e.Pretty(0)
	}
}
