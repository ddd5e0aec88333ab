package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
)

// dashboard is the part of a dashboard JSON the checks read.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string            `json:"name"`
			Query      string            `json:"query"`
			Datasource map[string]string `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int                      `json:"id"`
		Type       string                   `json:"type"`
		Title      string                   `json:"title"`
		Datasource map[string]string        `json:"datasource"`
		GridPos    struct{ X, Y, W, H int } `json:"gridPos"`
		Targets    []json.RawMessage        `json:"targets"`
	} `json:"panels"`
}

func loadDashboards(t *testing.T) map[string]dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "provisioning", "dashboards", "*.json"))
	if err != nil || len(files) < 4 {
		t.Fatalf("dashboards: %v (%d files)", err, len(files))
	}
	out := map[string]dashboard{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = d
	}
	return out
}

// TestDashboardsWellFormed: every panel and variable uses the provisioned
// datasource, ids and uids are unique, panels fit the 24-column grid, and
// every query decodes and passes the backend's own validation.
func TestDashboardsWellFormed(t *testing.T) {
	yaml, err := os.ReadFile(filepath.Join("..", "..", "provisioning", "datasources", "tailroot.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(yaml), "type: "+ID) || !strings.Contains(string(yaml), "uid: tailroot") {
		t.Fatalf("datasource provisioning does not define uid tailroot of type %s", ID)
	}
	uids := map[string]bool{}
	for name, d := range loadDashboards(t) {
		if d.UID == "" || uids[d.UID] {
			t.Errorf("%s: uid %q empty or repeated", name, d.UID)
		}
		uids[d.UID] = true
		for _, v := range d.Templating.List {
			if v.Datasource["uid"] != "tailroot" || !strings.HasPrefix(v.Query, "label_values(") {
				t.Errorf("%s: variable %s: datasource %v query %q", name, v.Name, v.Datasource, v.Query)
			}
		}
		ids := map[int]bool{}
		for _, p := range d.Panels {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d repeated", name, p.ID)
			}
			ids[p.ID] = true
			if p.GridPos.X < 0 || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("%s: panel %q gridPos %+v outside 24 columns", name, p.Title, p.GridPos)
			}
			if p.Type == "row" {
				continue
			}
			if p.Datasource["uid"] != "tailroot" || p.Datasource["type"] != ID || len(p.Targets) == 0 {
				t.Errorf("%s: panel %q: datasource %v, %d targets", name, p.Title, p.Datasource, len(p.Targets))
			}
			for _, raw := range p.Targets {
				q, err := parseQuery(backend.DataQuery{JSON: raw})
				if err != nil {
					t.Errorf("%s: panel %q: %v", name, p.Title, err)
					continue
				}
				if q.QueryType != QueryTypePromQL {
					dq := backend.DataQuery{JSON: raw, TimeRange: backend.TimeRange{From: T0, To: T0.Add(time.Hour)}, Interval: 15 * time.Second}
					if _, err := attributionParams(q, dq); err != nil {
						t.Errorf("%s: panel %q: %v", name, p.Title, err)
					}
				}
			}
		}
	}
}

var dashVar = regexp.MustCompile(`\$(__rate_interval|model|instance)\b`)

// TestDashboardsAgainstSimulator runs every dashboard query, as Grafana
// would after interpolation, against the vLLM simulator: PromQL panels must
// return data; attribution panels must answer, say the server does not
// support them yet, or report that the window holds no request records.
func TestDashboardsAgainstSimulator(t *testing.T) {
	srv := simServer(t)
	ds := newTestDatasource(t, backend.DataSourceInstanceSettings{Type: ID, URL: srv.URL})
	values := map[string]string{"$__rate_interval": "2m", "$model": ".*", "$instance": "llama-3-1-8b-instruct-0:8000"}
	now := time.Now()
	for name, d := range loadDashboards(t) {
		for _, p := range d.Panels {
			for _, raw := range p.Targets {
				js := dashVar.ReplaceAllStringFunc(string(raw), func(m string) string { return values[m] })
				dq := backend.DataQuery{RefID: "A", JSON: []byte(js), TimeRange: backend.TimeRange{From: now.Add(-30 * time.Minute), To: now}, Interval: 30 * time.Second, MaxDataPoints: 500}
				q, _ := parseQuery(dq)
				r := query(t, ds, dq)
				if q.QueryType != QueryTypePromQL {
					// The simulator keeps no request records, so a server with
					// the endpoint may answer 422 (no requests in window).
					if r.Error != nil && r.Error.Error() != notSupported(q.QueryType) && r.Status != 422 {
						t.Errorf("%s: panel %q: %v", name, p.Title, r.Error)
					}
					if r.Error != nil && r.ErrorSource != backend.ErrorSourceDownstream {
						t.Errorf("%s: panel %q: plugin error %v", name, p.Title, r.Error)
					}
					continue
				}
				if r.Error != nil {
					t.Errorf("%s: panel %q: %v", name, p.Title, r.Error)
					continue
				}
				rows := 0
				for _, f := range r.Frames {
					rows += f.Rows()
				}
				if rows == 0 {
					t.Errorf("%s: panel %q: no data for %s", name, p.Title, q.Expr)
				}
			}
		}
	}
}
