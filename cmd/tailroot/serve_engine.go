package main

import (
	"flag"
	"fmt"

	"github.com/tailroot/tailroot/query"
)

// engineFlag is --query.engine: which evaluator range and instant queries
// use. "fast" (the default) evaluates the dashboard shapes query/fast
// compiles with it and everything else upstream; "upstream" sends every
// query to the upstream Prometheus engine, for comparison or as an escape
// hatch.
type engineFlag struct{ o *query.Options }

func (f engineFlag) String() string {
	if f.o == nil || f.o.Engine == "" {
		return query.EngineFast
	}
	return f.o.Engine
}

func (f engineFlag) Set(v string) error {
	switch v {
	case query.EngineFast, query.EngineUpstream:
		f.o.Engine = v
		return nil
	}
	return fmt.Errorf("%q is not an engine (fast, upstream)", v)
}

func addEngineFlags(fs *flag.FlagSet, c *serveConfig) {
	fs.Var(engineFlag{&c.query}, "query.engine", "evaluator for queries: fast (query/fast for the shapes it takes, the upstream engine for the rest; the same answers) or upstream (the upstream engine only)")
}
