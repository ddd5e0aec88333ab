package main

import (
	"flag"
	"net/http"
	"net/http/pprof"

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
	r.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline).Methods(http.MethodGet)
	r.HandleFunc("/debug/pprof/profile", pprof.Profile).Methods(http.MethodGet)
	r.HandleFunc("/debug/pprof/symbol", pprof.Symbol).Methods(http.MethodGet, http.MethodPost)
	r.HandleFunc("/debug/pprof/trace", pprof.Trace).Methods(http.MethodGet)
	// Index serves the named profiles (heap, allocs, goroutine, block,
	// mutex, threadcreate) under /debug/pprof/<name>.
	r.PathPrefix("/debug/pprof/").HandlerFunc(pprof.Index).Methods(http.MethodGet)
}
