package api

import (
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
