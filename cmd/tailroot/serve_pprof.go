package main

import (
	"flag"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/gorilla/mux"
)

// pprofFlags is --web.enable-pprof: Go's runtime profiles under
// /debug/pprof/, where Prometheus and VictoriaMetrics serve them, so the
// same `go tool pprof http://host:port/debug/pprof/profile` that profiles
// a peer profiles tailroot while it answers a slow query. On by default
// as in both; a CPU profile costs the server a few percent while it is
// taken and nothing otherwise.
type pprofFlags struct{ on bool }

func addPprofFlags(fs *flag.FlagSet, c *serveConfig) {
	fs.BoolVar(&c.pprof.on, "web.enable-pprof", true, "serve Go runtime profiles under /debug/pprof/ (CPU, heap, goroutines), as Prometheus does")
}

func (f pprofFlags) register(r *mux.Router) {
	if !f.on {
		return
	}
	// One route for the whole tree (the route table lists it once):
	// cmdline, profile, symbol and trace have their own handlers, every
	// other name is a runtime profile (heap, allocs, goroutine, block,
	// mutex, threadcreate) or, empty, the index.
	r.PathPrefix("/debug/pprof/").HandlerFunc(servePprof).Methods(http.MethodGet, http.MethodPost)
}

func servePprof(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, "/debug/pprof/") {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		pprof.Index(w, r)
	}
}
