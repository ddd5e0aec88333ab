package fast_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tailroot/tailroot/query/fast"
)

// FuzzDifferential mutates queries and checks that whatever the fast path
// compiles and answers, it answers as the upstream engine does.
func FuzzDifferential(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 5))
	for range 40 {
		f.Add(genQuery(r), int64(r.IntN(7200)), int64(r.IntN(3600)), uint8(r.IntN(6)))
	}
	db := openDiffDB(f, 11)
	ng := promql.NewEngine(promql.EngineOpts{
		MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute, UseStartTimestamps: true,
	})
	p := parser.NewParser(parser.Options{})
	steps := []time.Duration{time.Second, 7 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute}
	f.Fuzz(func(t *testing.T, qs string, startSec, lenSec int64, stepIdx uint8) {
		expr, err := p.ParseExpr(qs)
		if err != nil {
			return
		}
		plan, ok := fast.Compile(expr)
		if !ok {
			return
		}
		start := diffStart.Add(time.Duration(startSec%7200) * time.Second)
		end := start.Add(time.Duration(lenSec%3600) * time.Second)
		if end.Before(start) {
			return
		}
		step := steps[int(stepIdx)%len(steps)]
		qry, err := ng.NewRangeQuery(context.Background(), db, nil, qs, start, end, step)
		if err != nil {
			return
		}
		res := qry.Exec(context.Background())
		if res.Err != nil {
			return
		}
		got, annos, err := plan.Range(context.Background(), db, fast.DefaultOptions(), start, end, step)
		if err != nil {
			return // handed back or refused: upstream answers
		}
		if d := diffValues(res.Value, got, false); d != "" {
			t.Fatalf("%s [%d,%d] step %s:\n%s", qs, start.Unix(), end.Unix(), step, d)
		}
		if w, g := annoStrings(res.Warnings), annoStrings(annos); !slices.Equal(w, g) {
			t.Fatalf("%s: annotations\nupstream %q\nfast     %q", qs, w, g)
		}
	})
}
