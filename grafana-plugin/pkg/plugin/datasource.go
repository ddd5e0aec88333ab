package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/backend/httpclient"
	"github.com/grafana/grafana-plugin-sdk-go/backend/instancemgmt"
)

// ID is the plugin id, as in plugin.json.
const ID = "tailroot-tailroot-datasource"

// Datasource is one configured tailroot datasource. Grafana's instance
// manager creates one per datasource settings version and calls Dispose when
// the settings change.
type Datasource struct {
	client *client
}

var (
	_ backend.QueryDataHandler      = (*Datasource)(nil)
	_ backend.CheckHealthHandler    = (*Datasource)(nil)
	_ backend.CallResourceHandler   = (*Datasource)(nil)
	_ instancemgmt.InstanceDisposer = (*Datasource)(nil)
)

// NewDatasource builds a Datasource from Grafana's instance settings. The
// HTTP client comes from the SDK, so basic auth (basicAuthUser +
// secureJsonData.basicAuthPassword), custom headers (jsonData.httpHeaderNameN
// + secureJsonData.httpHeaderValueN), TLS and jsonData.timeout work as in
// Grafana's own HTTP datasources.
func NewDatasource(ctx context.Context, settings backend.DataSourceInstanceSettings) (instancemgmt.Instance, error) {
	opts, err := settings.HTTPClientOptions(ctx)
	if err != nil {
		return nil, fmt.Errorf("http client options: %w", err)
	}
	hc, err := httpclient.New(opts)
	if err != nil {
		return nil, fmt.Errorf("http client: %w", err)
	}
	c, err := newClient(settings.URL, hc)
	if err != nil {
		return nil, err
	}
	return &Datasource{client: c}, nil
}

// Dispose releases idle connections when Grafana replaces the instance.
func (d *Datasource) Dispose() { d.client.http.CloseIdleConnections() }

// QueryData runs each query on its own; one query's failure is its RefID's
// error and leaves the others' frames intact.
func (d *Datasource) QueryData(ctx context.Context, req *backend.QueryDataRequest) (*backend.QueryDataResponse, error) {
	resp := backend.NewQueryDataResponse()
	for _, q := range req.Queries {
		resp.Responses[q.RefID] = d.runQuery(ctx, q)
	}
	return resp, nil
}

// buildInfo is /api/v1/status/buildinfo's data.
type buildInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	Branch    string `json:"branch"`
	GoVersion string `json:"goVersion"`
}

// CheckHealth asks the server for its build information: it proves the URL,
// credentials and headers work, and tells the user which version answers.
func (d *Datasource) CheckHealth(ctx context.Context, _ *backend.CheckHealthRequest) (*backend.CheckHealthResult, error) {
	env, err := d.client.get(ctx, "/api/v1/status/buildinfo", nil)
	if err != nil {
		return &backend.CheckHealthResult{Status: backend.HealthStatusError, Message: "cannot reach tailroot: " + err.Error()}, nil
	}
	var bi buildInfo
	if err := json.Unmarshal(env.Data, &bi); err != nil || bi.Version == "" {
		return &backend.CheckHealthResult{Status: backend.HealthStatusError, Message: fmt.Sprintf("server at %s did not return tailroot build info: %s", d.client.base.Redacted(), truncate(string(env.Data), 200))}, nil
	}
	details, _ := json.Marshal(bi)
	return &backend.CheckHealthResult{
		Status:      backend.HealthStatusOk,
		Message:     fmt.Sprintf("tailroot %s (revision %s) is reachable", bi.Version, bi.Revision),
		JSONDetails: details,
	}, nil
}

// Resource paths served by CallResource, for the query editor's
// autocompletion. Each answers a JSON array of strings.
const (
	resourceMetrics     = "metrics"      // metric names
	resourceLabels      = "labels"       // label names
	resourceLabelValues = "label-values" // values of ?label=NAME
)

// CallResource serves autocompletion lists from the server's label API.
// Optional query parameters match[] (series selectors), start and end (Unix
// seconds) are passed through to narrow the lists.
func (d *Datasource) CallResource(ctx context.Context, req *backend.CallResourceRequest, sender backend.CallResourceResponseSender) error {
	if req.Method != "" && req.Method != http.MethodGet {
		return sendJSON(sender, http.StatusMethodNotAllowed, map[string]string{"error": "method " + req.Method + " not allowed; use GET"})
	}
	in, err := url.ParseQuery(queryPart(req.URL))
	if err != nil {
		return sendJSON(sender, http.StatusBadRequest, map[string]string{"error": "query string: " + err.Error()})
	}
	params := url.Values{}
	for _, k := range []string{"match[]", "start", "end"} {
		if v, ok := in[k]; ok {
			params[k] = v
		}
	}
	var path string
	switch strings.Trim(req.Path, "/") {
	case resourceMetrics:
		path = "/api/v1/label/__name__/values"
	case resourceLabels:
		path = "/api/v1/labels"
	case resourceLabelValues:
		name := in.Get("label")
		if name == "" {
			return sendJSON(sender, http.StatusBadRequest, map[string]string{"error": "label-values: missing parameter label"})
		}
		path = "/api/v1/label/" + url.PathEscape(name) + "/values"
	default:
		return sendJSON(sender, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no resource %q; have metrics, labels, label-values", req.Path)})
	}
	env, err := d.client.get(ctx, path, params)
	if err != nil {
		status := http.StatusBadGateway
		var ae *APIError
		if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 {
			status = ae.Status
		}
		return sendJSON(sender, status, map[string]string{"error": err.Error()})
	}
	var list []string
	if err := json.Unmarshal(env.Data, &list); err != nil {
		return sendJSON(sender, http.StatusBadGateway, map[string]string{"error": fmt.Sprintf("%s: data is not a list of strings: %v", path, err)})
	}
	if list == nil {
		list = []string{}
	}
	return sendJSON(sender, http.StatusOK, list)
}

// queryPart returns what follows "?" in a resource URL (Grafana sends the
// path relative to the resource root, with the query string).
func queryPart(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[i+1:]
	}
	return ""
}

func sendJSON(sender backend.CallResourceResponseSender, status int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode resource response: %w", err)
	}
	return sender.Send(&backend.CallResourceResponse{
		Status:  status,
		Headers: map[string][]string{"Content-Type": {"application/json"}},
		Body:    body,
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
