package main

import (
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/mux"
)

// TestPprofRoutes checks that --web.enable-pprof serves the named
// profiles and the special handlers under one route, and nothing when off.
func TestPprofRoutes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, http.StatusOK},
		{[]string{"--web.enable-pprof=false"}, http.StatusNotFound},
	} {
		c := &serveConfig{}
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		addPprofFlags(fs, c)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		r := mux.NewRouter()
		c.pprof.register(r)
		for path, body := range map[string]string{
			"/debug/pprof/":                  "goroutine",    // the index lists the profiles
			"/debug/pprof/heap?debug=1":      "heap profile", // a runtime profile, as text
			"/debug/pprof/goroutine?debug=1": "TestPprofRoutes",
			"/debug/pprof/cmdline":           "",
		} {
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != tc.want {
				t.Errorf("%v %s: %d, want %d", tc.args, path, rec.Code, tc.want)
				continue
			}
			if tc.want == http.StatusOK && !strings.Contains(rec.Body.String(), body) {
				t.Errorf("%v %s: body %.200q lacks %q", tc.args, path, rec.Body.String(), body)
			}
		}
	}
}
