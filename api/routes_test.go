package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/tsdb"
)

// TestRoutes checks the route table against routes known from the code:
// the Prometheus API's (probed behind the catch-all), this package's, and
// one added through Handlers.Extra; and that listing them ran no handler.
func TestRoutes(t *testing.T) {
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ng, err := query.New(query.DefaultOptions(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	ran := false
	extra := func(r *mux.Router) {
		r.HandleFunc("/api/v1/extra/{id}", func(http.ResponseWriter, *http.Request) { ran = true }).Methods(http.MethodPut)
	}
	s := New(db, ng, Handlers{Extra: extra}, Options{Reload: func() error { return nil }}, nil, prometheus.NewRegistry())
	got := map[string]string{}
	for _, r := range s.Routes() {
		got[r.Path] = fmt.Sprint(r.Methods)
	}
	for path, want := range map[string]string{
		"/api/v1/query":                    "[GET POST]",
		"/api/v1/label/{name}/values":      "[GET]",
		"/api/v1/admin/tsdb/delete_series": "[POST PUT]",
		"/api/v1/read":                     "[POST]",
		"/api/v1/{path}":                   "[OPTIONS]",
		"/api/v1/metadata":                 "[GET POST]",
		"/api/v1/extra/{id}":               "[PUT]",
		"/-/healthy":                       "[GET HEAD]",
		"/-/reload":                        "[POST PUT]",
		"/metrics":                         "[]",
		"/":                                "[GET]",
		RoutesPath:                         "[GET]",
	} {
		if got[path] != want {
			t.Errorf("route %s: methods %q, want %q", path, got[path], want)
		}
	}
	if ran {
		t.Error("listing the routes ran a handler")
	}
	// The endpoint serves the same table in the API envelope.
	code, body := get(t, s.router, RoutesPath, nil)
	var env struct {
		Status string  `json:"status"`
		Data   []Route `json:"data"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &env) != nil || env.Status != "success" || len(env.Data) != len(got) {
		t.Errorf("%s: %d %s", RoutesPath, code, body)
	}
	// An ordinary request still reaches the Prometheus handler.
	if code, body := get(t, s.router, "/api/v1/query", nil); code != http.StatusBadRequest {
		t.Errorf("query without parameters: %d %s, want 400", code, body)
	}
}
