package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/prometheus/common/model"
)

// Query types (Query.QueryType). The frontend sends one per query; an empty
// type means promql, so queries saved before the type existed still run.
const (
	QueryTypePromQL    = "promql"
	QueryTypeBreakdown = "breakdown"
	QueryTypeRootCause = "rootcause"
	QueryTypeCausal    = "causal"
	QueryTypeAB        = "ab"
)

// Formats of a promql query's result.
const (
	FormatTimeSeries = "time_series"
	FormatTable      = "table"
	// FormatHeatmap turns cumulative le buckets into one heatmap-rows frame
	// per label set, as Grafana's Prometheus datasource does.
	FormatHeatmap = "heatmap"
)

// Query is the JSON model of one panel query. Fields not used by the query
// type are ignored. Template variables have been replaced by the frontend.
type Query struct {
	QueryType string `json:"queryType"`

	// promql: the expression (PromQL or MetricsQL), instant and/or range,
	// result format and legend template ("{{model_name}} p99").
	Expr         string `json:"expr"`
	Instant      bool   `json:"instant"`
	Range        bool   `json:"range"`
	Format       string `json:"format"`
	LegendFormat string `json:"legendFormat"`
	// Step is the smallest step for range queries (a Prometheus duration or
	// seconds); empty uses Grafana's interval.
	Step string `json:"step"`

	// Attribution fields, shared where their meaning is the same. Zero
	// values take the defaults written in CONTRACT.md.
	Metric   string  `json:"metric"`
	Selector string  `json:"selector"`
	Quantile float64 `json:"quantile"`
	Method   string  `json:"method"`
	View     string  `json:"view"`
	// Baseline is how far before the panel's range the baseline window of a
	// Shapley breakdown lies (e.g. "1d"); the window has the same length.
	Baseline    string   `json:"baseline"`
	Target      string   `json:"target"`
	Candidates  string   `json:"candidates"`
	ChangeAt    string   `json:"changeAt"`
	Alpha       float64  `json:"alpha"`
	MaxLag      int      `json:"maxLag"`
	Outcome     string   `json:"outcome"`
	Treatment   string   `json:"treatment"`
	Confounders []string `json:"confounders"`
	Level       float64  `json:"level"`
	A           string   `json:"a"`
	B           string   `json:"b"`
	CIMethod    string   `json:"ciMethod"`
}

// queryError is a per-RefID failure with the status and source Grafana shows.
type queryError struct {
	status backend.Status
	source backend.ErrorSource
	err    error
}

func (e *queryError) Error() string { return e.err.Error() }
func (e *queryError) Unwrap() error { return e.err }

// badQuery is a downstream 400: the query as written cannot run.
func badQuery(format string, a ...any) error {
	return &queryError{status: backend.StatusBadRequest, source: backend.ErrorSourceDownstream, err: fmt.Errorf(format, a...)}
}

// errorResponse turns any error from running a query into its DataResponse,
// choosing status and source: queryError says so itself, an APIError is the
// server's answer (downstream, with the server's status), anything else is
// a plugin failure.
func errorResponse(err error) backend.DataResponse {
	var qe *queryError
	if errors.As(err, &qe) {
		return backend.ErrDataResponseWithSource(qe.status, qe.source, qe.Error())
	}
	var ae *APIError
	if errors.As(err, &ae) {
		status := backend.StatusBadGateway
		switch {
		case ae.Status == 0:
			status = backend.StatusBadGateway
		case ae.Status == 504:
			status = backend.StatusTimeout
		case ae.Status >= 400 && ae.Status < 600:
			status = backend.Status(ae.Status)
		}
		return backend.ErrDataResponseWithSource(status, backend.ErrorSourceDownstream, err.Error())
	}
	if backend.IsDownstreamError(err) {
		return backend.ErrDataResponseWithSource(backend.StatusBadGateway, backend.ErrorSourceDownstream, err.Error())
	}
	return backend.ErrDataResponseWithSource(backend.StatusInternal, backend.ErrorSourcePlugin, err.Error())
}

// parseQuery decodes dq's JSON and fills the query type from Grafana's
// field when the JSON has none.
func parseQuery(dq backend.DataQuery) (*Query, error) {
	q := &Query{}
	if len(dq.JSON) > 0 {
		if err := json.Unmarshal(dq.JSON, q); err != nil {
			return nil, badQuery("query JSON: %v", err)
		}
	}
	if q.QueryType == "" {
		q.QueryType = dq.QueryType
	}
	if q.QueryType == "" {
		q.QueryType = QueryTypePromQL
	}
	return q, nil
}

// runQuery runs one query and never panics its caller's loop: a failure is
// returned as an error DataResponse for this RefID only.
func (d *Datasource) runQuery(ctx context.Context, dq backend.DataQuery) backend.DataResponse {
	q, err := parseQuery(dq)
	if err != nil {
		return errorResponse(err)
	}
	var resp backend.DataResponse
	switch q.QueryType {
	case QueryTypePromQL:
		resp, err = d.runPromQL(ctx, q, dq)
	case QueryTypeBreakdown, QueryTypeRootCause, QueryTypeCausal, QueryTypeAB:
		resp, err = d.runAttribution(ctx, q, dq)
	default:
		err = badQuery("queryType %q: want one of promql, breakdown, rootcause, causal, ab", q.QueryType)
	}
	if err != nil {
		return errorResponse(err)
	}
	return resp
}

// parseDuration accepts a Prometheus duration ("15s", "1h30m", "1d") or a
// number of seconds ("15", "0.5").
func parseDuration(field, s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) || f > math.MaxInt64/float64(time.Second) {
			return 0, badQuery("%s %q: want a non-negative duration", field, s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := model.ParseDuration(s)
	if err != nil {
		return 0, badQuery("%s %q: %v", field, s, err)
	}
	return time.Duration(d), nil
}

// formatUnix renders t as Unix seconds with millisecond precision, the form
// the Prometheus API takes.
func formatUnix(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)
}

// formatSeconds renders d as seconds, the form the Prometheus API takes.
func formatSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}
