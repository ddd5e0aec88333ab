package api

import "net/http"

// probe serves /-/ready or /-/healthy: 200 "tailroot is <what>." when check
// is nil or returns nil, else 503 naming why (as Prometheus answers 503
// while it is not ready), so load balancers and orchestrators see what the
// server can really do.
func probe(what string, check func() error) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if check != nil {
			if err := check(); err != nil {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte("tailroot is not " + what + ": " + err.Error() + "\n"))
				return
			}
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("tailroot is " + what + ".\n"))
	}
}
