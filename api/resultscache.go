package api

import (
	"net/http"
	"strings"

	"github.com/tailroot/tailroot/query/resultscache"
)

// cacheControl lets one range query skip the results cache: the header
// Cache-Control: no-store (or no-cache), as Cortex' and Thanos' query
// frontends honour it, or the parameter nocache=1, VictoriaMetrics' name
// (dashboards and benchmarks that send it to both get uncached answers
// from both). Requests for statistics (stats=…, cost=…) are evaluated
// uncached too: the statistics describe one evaluation, not a cache read.
func cacheControl(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/query_range") && skipResultsCache(r) {
			r = r.WithContext(resultscache.WithBypass(r.Context()))
		}
		next.ServeHTTP(w, r)
	})
}

func skipResultsCache(r *http.Request) bool {
	for _, v := range r.Header.Values("Cache-Control") {
		for _, d := range strings.Split(v, ",") {
			switch strings.ToLower(strings.TrimSpace(d)) {
			case "no-store", "no-cache":
				return true
			}
		}
	}
	switch strings.ToLower(r.FormValue("nocache")) {
	case "1", "true":
		return true
	}
	return r.FormValue("stats") != "" || r.FormValue("cost") != ""
}
