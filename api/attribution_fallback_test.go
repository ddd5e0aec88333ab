package api

import (
	"net/http"
	"net/url"
	"testing"
)

// TestFallbackChain: method=auto answers from records where the window has
// them, else from tail accumulators, else from stage histograms, and says
// which. Model h has only stage histograms: per minute 9 requests with
// queue in (0.25, 0.5] and 1 with queue in (2, 4], all 10 with decode in
// (0.5, 1]. The P90 tail is the slow-queue requests, whose stage means
// lie in (2, 4] and (0.5, 1]. The top 10% of the queue histogram is all
// in (2, 4], so its bound is the edge 4 (the sum-based bound,
// (0.66 − 0.9·0.25)/0.1 = 4.35 per request, is looser); decode's is 1
// ((0.75 − 0.9·0.5)/0.1 = 3 is looser): 5 in all, above any tail mean
// the data allow (at most 4 + 1).
func TestFallbackChain(t *testing.T) {
	e := newAttributionEnv(t, nil)
	for _, c := range []struct {
		model, method, kind string
	}{
		{"m", "tail_mean_records", "exact"},
		{"z", "tail_mean_accumulators", "estimate"},
		{"h", "comonotonic_bound", "bound"},
	} {
		code, env, body := e.get(t, "/api/v1/attribution/breakdown", url.Values{
			"selector": {`{model_name="` + c.model + `"}`}, "start": {"240"}, "end": {"540"}, "quantile": {"0.9"}, "method": {"auto"},
		})
		if code != http.StatusOK {
			t.Fatalf("model %s: status %d: %s", c.model, code, body)
		}
		d := env["data"].(map[string]any)
		if d["method"] != c.method || d["kind"] != c.kind {
			t.Errorf("model %s: method %v kind %v, want %s %s", c.model, d["method"], d["kind"], c.method, c.kind)
		}
		if c.model != "h" {
			continue
		}
		want := map[string]float64{"queue": 4, "decode": 1}
		for _, s := range d["stages"].([]any) {
			row := s.(map[string]any)
			if w, ok := want[row["stage"].(string)]; !ok || !near(row["upper_seconds"], w) || !near(row["contribution_seconds"], w) {
				t.Errorf("stage row %v, want upper %v", row, w)
			}
		}
		if !near(d["target_seconds"], 5) || len(env["warnings"].([]any)) == 0 {
			t.Errorf("target %v warnings %v, want 5 and a warning", d["target_seconds"], env["warnings"])
		}
		// The report takes the same chain and follows its schema.
		code, env, body = e.get(t, "/api/v1/attribution/report", url.Values{
			"selector": {`{model_name="h"}`}, "end": {"540"}, "quantile": {"0.9"},
		})
		if code != http.StatusOK {
			t.Fatalf("report: status %d: %s", code, body)
		}
		rep := env["data"].(map[string]any)
		e.validate(t, rep)
		if rep["method"] != "comonotonic_bound" || rep["kind"] != "bound" {
			t.Errorf("report method %v kind %v", rep["method"], rep["kind"])
		}
	}
}
