package metricsql

import (
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
)

// FuzzTranslate checks the two promises Translate makes for any input: it
// does not panic, and any text it returns parses as PromQL under the
// options it was given.
func FuzzTranslate(f *testing.F) {
	for _, tc := range translationCases {
		f.Add(tc.mql, uint8(0), int64(0))
		f.Add(tc.mql, uint8(3), int64(time.Minute))
	}
	for _, q := range []string{
		`x{a="b" or c="d"}[5m]`, `rate(x{a="\xff" or b=~".*"} offset -1i @ 1e300)`,
		`label_map(x, "l", "a", "b", "b", "a")`, `x[1000000000000000y]`, `x offset 9223372036854775807`,
		`WITH (f(a, b) = a + b) f(1, f(x, y))`, `{"a.b"=~"c|d" or e!~""}`, `sum(x) by (a) if on(b) 1`,
		`(1, 2, 3) > bool time()`, `-(-(-x))`, `x ^ -Inf`, `step()[5m:]`, `x @ start() offset 1h`,
		`topk(-1, share(x) without (y)) keep_metric_names`, `{__name__=~"a" or __name__=~"a"}`,
	} {
		f.Add(q, uint8(3), int64(0))
	}
	f.Fuzz(func(t *testing.T, q string, flags uint8, step int64) {
		opts := Options{
			EnableExperimentalFunctions: flags&1 != 0,
			EnableBinopFillModifiers:    flags&2 != 0,
			EnableUnquotedUTF8Names:     flags&4 != 0,
			Step:                        time.Duration(step),
		}
		out, err := Translate(q, opts)
		if err != nil {
			return
		}
		if _, err := parser.NewParser(opts.ParserOptions()).ParseExpr(out); err != nil {
			t.Fatalf("Translate(%q) = %q, which does not parse: %v", q, out, err)
		}
	})
}
