package api

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	v1 "github.com/prometheus/prometheus/web/api/v1"

	"github.com/tailroot/tailroot/internal/httpapi"
)

// TestTimeBoundsArePrometheus: the endpoints tailroot adds accept the same
// time range as the Prometheus API it serves beside them.
func TestTimeBoundsArePrometheus(t *testing.T) {
	if !httpapi.MinTime.Equal(v1.MinTime) || !httpapi.MaxTime.Equal(v1.MaxTime) {
		t.Fatalf("httpapi bounds [%v, %v], web/api/v1 [%v, %v]", httpapi.MinTime, httpapi.MaxTime, v1.MinTime, v1.MaxTime)
	}
}

// TestAttributionRefusesOutOfRangeTimes: a time past the API's range is a
// 400 naming the parameter, not some other time.
func TestAttributionRefusesOutOfRangeTimes(t *testing.T) {
	e := newAttributionEnv(t, nil)
	for _, v := range []string{"1e300", "-1e300", "NaN", "9.3e15"} {
		code, env, body := e.get(t, "/api/v1/attribution/breakdown", url.Values{"start": {"0"}, "end": {v}})
		if code != http.StatusBadRequest || env["errorType"] != "bad_data" || !strings.Contains(env["error"].(string), "end=") {
			t.Errorf("end=%s: %d %s, want 400 bad_data naming end", v, code, body)
		}
	}
}
