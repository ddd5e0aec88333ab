// Command devserver serves the plugin's frontend and backend together
// without Grafana: it answers the few Grafana HTTP API calls a datasource
// frontend makes (POST /api/ds/query, GET /api/datasources/uid/{uid}/
// resources/{path} and …/health) by calling the plugin backend in process,
// exactly as Grafana would call it over gRPC, and serves static files (the
// browser-test harness) from --static.
//
//	devserver --listen 127.0.0.1:3300 --tailroot http://127.0.0.1:9490 --static grafana-plugin/harness/dist
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"

	"github.com/tailroot/tailroot/grafana-plugin/pkg/plugin"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:3300", "address to serve on")
	tailroot := flag.String("tailroot", "http://127.0.0.1:9490", "tailroot server URL (the datasource URL)")
	static := flag.String("static", "", "directory of static files to serve at /")
	flag.Parse()

	inst, err := plugin.NewDatasource(context.Background(), backend.DataSourceInstanceSettings{
		ID: 1, UID: "tailroot", Name: "tailroot", Type: plugin.ID, URL: *tailroot, JSONData: []byte(`{}`),
	})
	if err != nil {
		log.Fatalf("datasource: %v", err)
	}
	ds := inst.(*plugin.Datasource)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/ds/query", func(w http.ResponseWriter, r *http.Request) { handleQuery(ds, w, r) })
	mux.HandleFunc("GET /api/datasources/uid/{uid}/resources/{path...}", func(w http.ResponseWriter, r *http.Request) {
		handleResource(ds, w, r)
	})
	mux.HandleFunc("GET /api/datasources/uid/{uid}/health", func(w http.ResponseWriter, r *http.Request) {
		res, _ := ds.CheckHealth(r.Context(), &backend.CheckHealthRequest{})
		status := "OK"
		if res.Status != backend.HealthStatusOk {
			status = "ERROR"
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": status, "message": res.Message})
	})
	if *static != "" {
		mux.Handle("GET /", http.FileServer(http.Dir(*static)))
	}
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("devserver on http://%s (tailroot %s)", *listen, *tailroot)
	log.Fatal(srv.ListenAndServe())
}

// queryBody is what DataSourceWithBackend posts to /api/ds/query.
type queryBody struct {
	Queries []json.RawMessage `json:"queries"`
	From    string            `json:"from"`
	To      string            `json:"to"`
}

func handleQuery(ds *plugin.Datasource, w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": err.Error()})
		return
	}
	var qb queryBody
	if err := json.Unmarshal(body, &qb); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "body: " + err.Error()})
		return
	}
	from, err1 := parseMillis(qb.From)
	to, err2 := parseMillis(qb.To)
	if err1 != nil || err2 != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": fmt.Sprintf("from %q / to %q: want epoch milliseconds", qb.From, qb.To)})
		return
	}
	req := &backend.QueryDataRequest{}
	for i, raw := range qb.Queries {
		var meta struct {
			RefID         string  `json:"refId"`
			QueryType     string  `json:"queryType"`
			IntervalMs    float64 `json:"intervalMs"`
			MaxDataPoints int64   `json:"maxDataPoints"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"message": fmt.Sprintf("queries[%d]: %v", i, err)})
			return
		}
		req.Queries = append(req.Queries, backend.DataQuery{
			RefID: meta.RefID, QueryType: meta.QueryType, JSON: raw,
			Interval:      time.Duration(meta.IntervalMs * float64(time.Millisecond)),
			MaxDataPoints: meta.MaxDataPoints,
			TimeRange:     backend.TimeRange{From: from, To: to},
		})
	}
	resp, err := ds.QueryData(r.Context(), req)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"message": err.Error()})
		return
	}
	// Grafana answers 207 when some queries failed and 200 otherwise; the
	// body is the same {"results": {refId: {frames, error, status}}}.
	status := http.StatusOK
	for _, dr := range resp.Responses {
		if dr.Error != nil {
			status = http.StatusMultiStatus
		}
	}
	writeJSON(w, status, resp)
}

func handleResource(ds *plugin.Datasource, w http.ResponseWriter, r *http.Request) {
	path := r.PathValue("path")
	u := path
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	var out *backend.CallResourceResponse
	err := ds.CallResource(r.Context(), &backend.CallResourceRequest{Path: path, URL: u, Method: http.MethodGet},
		backend.CallResourceResponseSenderFunc(func(res *backend.CallResourceResponse) error { out = res; return nil }))
	if err != nil || out == nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"message": fmt.Sprint("resource: ", err)})
		return
	}
	for k, v := range out.Headers {
		w.Header()[k] = v
	}
	w.WriteHeader(out.Status)
	_, _ = w.Write(out.Body)
}

func parseMillis(s string) (time.Time, error) {
	ms, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(ms).UTC(), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"message":"encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
