package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/sim/fleet"
	"github.com/tailroot/tailroot/tsdb"
)

// fleetHandler stores one sim/fleet incident (exporters' own names, a
// host:port instance per exporter) with its metadata and returns the
// rootcause handler over it with discovered candidates.
func fleetHandler(t *testing.T, c fleet.Class, seed uint64) (*fleet.Incident, http.Handler) {
	t.Helper()
	inc, err := fleet.Generate(c, seed)
	if err != nil {
		t.Fatal(err)
	}
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	o.NoLockfile = true
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	app := db.AppenderV2(context.Background())
	for _, s := range inc.Series {
		ls := labels.FromMap(s.Labels)
		for _, x := range s.Samples {
			if _, err := app.Append(0, ls, 0, x.T, x.V, nil, nil, storage.AOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	for name, m := range inc.Metadata {
		if err := db.Metadata.Set(name, metadata.Metadata{Type: model.MetricType(m.Type), Unit: m.Unit, Help: m.Help}); err != nil {
			t.Fatal(err)
		}
	}
	ng, err := query.New(query.DefaultOptions(), query.NewRegistry(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ng.Close() })
	return inc, NewRootCauseHandler(ng, db, RootCauseOptions{Metadata: db.Metadata})
}

func fleetAsk(t *testing.T, inc *fleet.Incident, h http.Handler) rcFullAnswer {
	t.Helper()
	form := url.Values{"target": {inc.Target}, "start": {unix(inc.Start.Add(2 * 60e9))}, "end": {unix(inc.End)}, "step": {"15s"}}
	req := httptest.NewRequest(http.MethodGet, "/api/v1/attribution/rootcause?"+form.Encode(), nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var a rcFullAnswer
	if err := jsonUnmarshal(rec.Body.Bytes(), &a); err != nil || rec.Code != 200 {
		t.Fatalf("%d %v: %.500s", rec.Code, err, rec.Body.String())
	}
	return a
}

// rcFullAnswer is the part of the answer the discovery tests read.
type rcFullAnswer struct {
	Data struct {
		Verdict string `json:"verdict"`
		Ranking []struct {
			Candidate string            `json:"candidate"`
			Node      string            `json:"node"`
			Host      string            `json:"host"`
			JoinedBy  string            `json:"joined_by"`
			Reason    string            `json:"reason"`
			Labels    map[string]string `json:"labels"`
		} `json:"ranking"`
	} `json:"data"`
	Warnings []string `json:"warnings"`
}

// TestRootCauseDiscoversCandidates: with no candidates given, the endpoint
// finds them in what is stored — node-exporter's page faults, DCGM's
// temperature, an exporter no table knows — joins the exporters of a host
// by host, and puts the page-fault storm's cause first on the faulty host.
func TestRootCauseDiscoversCandidates(t *testing.T) {
	inc, h := fleetHandler(t, fleet.PageFaults, 2)
	a := fleetAsk(t, inc, h)
	found := map[string]bool{}
	for _, r := range a.Data.Ranking {
		switch {
		case strings.HasPrefix(r.Candidate, "node_vmstat_pgmajfault{"):
			found["pgmajfault"] = true
			if r.Node != "page_faults" || r.JoinedBy != "instance "+r.Labels["instance"]+" without port" {
				t.Errorf("pgmajfault: node %q joined by %q", r.Node, r.JoinedBy)
			}
		case strings.HasPrefix(r.Candidate, "DCGM_FI_DEV_GPU_TEMP{"):
			found["temp"] = true
			if r.JoinedBy != "Hostname label" || r.Node != "gpu_power" {
				t.Errorf("GPU temperature: node %q joined by %q", r.Node, r.JoinedBy)
			}
		case strings.HasPrefix(r.Candidate, "backup_uploaded_bytes_total{"):
			found["unknown"] = true
			if r.Node != "" {
				t.Errorf("backup: node %q, want unmapped", r.Node)
			}
		case strings.HasPrefix(r.Candidate, "node_cpu_seconds_total{"):
			if r.Labels["cpu"] != "" {
				t.Errorf("node_cpu_seconds_total keeps the per-CPU label: %v", r.Labels)
			}
		}
	}
	if len(found) != 3 {
		t.Errorf("discovered %v of pgmajfault, temp, unknown; %d candidates", found, len(a.Data.Ranking))
	}
	top := a.Data.Ranking[0]
	if a.Data.Verdict != "incident" || top.Host != inc.Truth.Host || !(strings.HasPrefix(top.Candidate, "node_vmstat_pgmajfault{") || strings.HasPrefix(top.Candidate, "node_pressure_memory_waiting_seconds_total{")) {
		t.Errorf("verdict %q, first %s on %s (%s); want the page faults of %s", a.Data.Verdict, top.Candidate, top.Host, top.Reason, inc.Truth.Host)
	}

	inc, h = fleetHandler(t, fleet.NoFault, 1)
	if a := fleetAsk(t, inc, h); a.Data.Verdict != "no incident" {
		t.Errorf("fault-free window: verdict %q, first %s", a.Data.Verdict, a.Data.Ranking[0].Candidate)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
