package resultscache

import (
	"maps"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

func TestCacheable(t *testing.T) {
	// A function registered beside upstream's, as tailroot's are.
	funcs := maps.Clone(parser.Functions)
	funcs["tail_mean"] = &parser.Function{Name: "tail_mean", ArgTypes: []parser.ValueType{parser.ValueTypeVector}, ReturnType: parser.ValueTypeVector}
	p := parser.NewParser(parser.Options{EnableExperimentalFunctions: true, Functions: funcs})
	for _, tc := range []struct {
		qs   string
		want bool
	}{
		{`histogram_quantile(0.99, sum by (le) (rate(x_bucket[1m])))`, true},
		{`sum by (model) (rate(tokens_total[5m]))`, true},
		{`x offset 5m`, true},
		{`rate(x[5m] offset 1h)`, true},
		{`max_over_time(rate(x[1m])[10m:30s])`, true},
		{`time() - timestamp(x)`, true},
		{`1 + 2`, true},
		{`x @ 1700000000`, false},
		{`x @ end()`, false},
		{`rate(x[5m] @ start())`, false},
		{`max_over_time(x[5m:1m] @ end())`, false},
		{`x offset -5m`, false},
		{`max_over_time(x[5m:1m] offset -1m)`, false},
		{`tail_mean(x)`, false},
		{`sum(tail_mean(x))`, false},
	} {
		expr, err := p.ParseExpr(tc.qs)
		if err != nil {
			t.Fatalf("%s: %v", tc.qs, err)
		}
		if got, why := cacheable(expr); got != tc.want {
			t.Errorf("cacheable(%s) = %v (%s), want %v", tc.qs, got, why, tc.want)
		}
	}
}
