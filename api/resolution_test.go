package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	remotequery "github.com/tailroot/tailroot/query/remote"
)

func TestMaxSourceResolutionParam(t *testing.T) {
	var (
		got    time.Duration
		gotSet bool
	)
	h := maxSourceResolution(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got, gotSet = remotequery.MaxSourceResolutionFrom(r.Context())
	}))
	for _, c := range []struct {
		query, form string
		code        int
		want        time.Duration
		set         bool
	}{
		{"", "", 200, 0, false},
		{"max_source_resolution=5m", "", 200, 5 * time.Minute, true},
		{"max_source_resolution=0s", "", 200, 0, true},
		{"max_source_resolution=auto", "", 200, remotequery.AutoResolution, true},
		{"", "max_source_resolution=1h", 200, time.Hour, true},
		{"max_source_resolution=soon", "", 400, 0, false},
		{"max_source_resolution=-5m", "", 400, 0, false},
	} {
		got, gotSet = 0, false
		var r *http.Request
		if c.form != "" {
			r = httptest.NewRequest(http.MethodPost, "/api/v1/query", strings.NewReader(c.form))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			r = httptest.NewRequest(http.MethodGet, "/api/v1/query?"+c.query, nil)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.code || got != c.want || gotSet != c.set {
			t.Errorf("%s%s: %d, resolution %v (set %v); want %d, %v (set %v): %s", c.query, c.form, w.Code, got, gotSet, c.code, c.want, c.set, w.Body)
		}
		if c.code == 400 && !strings.Contains(w.Body.String(), "max_source_resolution") {
			t.Errorf("%s: error does not name the parameter: %s", c.query, w.Body)
		}
	}
}
