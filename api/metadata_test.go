package api

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/metadata"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/tsdb"
)

// TestMetadataListsFamiliesWithSeries: /api/v1/metadata lists a family only
// while it has series (under its own name or a suffixed one), as Prometheus
// lists the metadata of active targets; limit counts listed families.
func TestMetadataListsFamiliesWithSeries(t *testing.T) {
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	loadDiffData(t, db) // vllm:num_requests_running, http_requests_total, …
	for fam, typ := range map[string]model.MetricType{
		"vllm:num_requests_running":         model.MetricTypeGauge,
		"http_requests":                     model.MetricTypeCounter,   // series http_requests_total
		"tailroot_request_e2e_seconds":      model.MetricTypeHistogram, // no series
		"tailroot_tail_stage_seconds_never": model.MetricTypeCounter,   // no series
	} {
		if err := db.Metadata.Set(fam, metadata.Metadata{Type: typ, Help: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	ng, err := query.New(query.DefaultOptions(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	h := New(db, ng, Handlers{}, Options{}, nil, prometheus.NewRegistry()).router
	list := func(params url.Values) []string {
		code, body := get(t, h, "/api/v1/metadata", params)
		var r struct {
			Data map[string]any `json:"data"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &r) != nil {
			t.Fatalf("%d %s", code, body)
		}
		if body[len(body)-1] == '\n' {
			t.Errorf("response ends with a newline; Prometheus' does not")
		}
		var out []string
		for k := range r.Data {
			out = append(out, k)
		}
		return out
	}
	if got := list(nil); len(got) != 2 {
		t.Errorf("listed %v, want the two families with series", got)
	}
	if got := list(url.Values{"limit": {"1"}}); len(got) != 1 {
		t.Errorf("limit=1 listed %v", got)
	}
	if got := list(url.Values{"metric": {"tailroot_request_e2e_seconds"}}); len(got) != 0 {
		t.Errorf("family without series listed: %v", got)
	}
}
