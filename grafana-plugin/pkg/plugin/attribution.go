package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/data"
)

// attributionPath is the endpoint of each attribution query type
// (CONTRACT.md).
var attributionPath = map[string]string{
	QueryTypeBreakdown: "/api/v1/attribution/breakdown",
	QueryTypeRootCause: "/api/v1/attribution/rootcause",
	QueryTypeCausal:    "/api/v1/attribution/causal",
	QueryTypeAB:        "/api/v1/attribution/ab",
}

// Views of breakdown and rootcause answers.
const (
	ViewStages  = "stages"
	ViewHeat    = "heat"
	ViewTokens  = "tokens"
	ViewRanking = "ranking"
	ViewGraph   = "graph"
)

// notSupported is the message for a server without the endpoint (404).
func notSupported(kind string) string {
	return fmt.Sprintf("this tailroot server does not support %s yet", kind)
}

// runAttribution validates the query, calls the kind's endpoint and converts
// the answer. A 404 means the server predates the endpoint.
func (d *Datasource) runAttribution(ctx context.Context, q *Query, dq backend.DataQuery) (backend.DataResponse, error) {
	params, err := attributionParams(q, dq)
	if err != nil {
		return backend.DataResponse{}, err
	}
	env, err := d.client.get(ctx, attributionPath[q.QueryType], params)
	if errors.Is(err, errNotFound) {
		return backend.ErrDataResponseWithSource(backend.StatusNotImplemented, backend.ErrorSourceDownstream, notSupported(q.QueryType)), nil
	}
	if err != nil {
		return backend.DataResponse{}, err
	}
	frames, err := attributionFrames(q, env.Data)
	if err != nil {
		return backend.DataResponse{}, err
	}
	for _, w := range env.Warnings {
		frames[0].AppendNotices(data.Notice{Severity: data.NoticeSeverityWarning, Text: w})
	}
	for i, f := range frames {
		if f.Meta == nil {
			f.Meta = &data.FrameMeta{}
		}
		if i == 0 {
			f.Meta.ExecutedQueryString = attributionPath[q.QueryType] + "?" + params.Encode()
		}
	}
	return backend.DataResponse{Frames: frames}, nil
}

// attributionParams builds the endpoint's query string from the query and
// the panel's time range, checking what the server would otherwise reject
// with a less helpful message.
func attributionParams(q *Query, dq backend.DataQuery) (url.Values, error) {
	p := url.Values{}
	p.Set("start", formatUnix(dq.TimeRange.From))
	p.Set("end", formatUnix(dq.TimeRange.To))
	setIf := func(k, v string) {
		if v = strings.TrimSpace(v); v != "" {
			p.Set(k, v)
		}
	}
	level := func(field string, v float64) error {
		if v == 0 {
			return nil
		}
		if !(v > 0 && v < 1) {
			return badQuery("%s %v: want a level in (0, 1), e.g. 0.99", field, v)
		}
		p.Set(field, strconv.FormatFloat(v, 'g', -1, 64))
		return nil
	}
	step := func() error {
		s, err := rangeStep(q, dq)
		if err != nil {
			return err
		}
		p.Set("step", formatSeconds(s))
		return nil
	}
	switch q.QueryType {
	case QueryTypeBreakdown:
		setIf("metric", q.Metric)
		setIf("selector", q.Selector)
		if err := level("quantile", q.Quantile); err != nil {
			return nil, err
		}
		switch q.Method {
		case "", "auto", "tail_mean", "euler", "excess", "shapley":
			setIf("method", q.Method)
		default:
			return nil, badQuery("method %q: want auto, tail_mean, euler, excess or shapley", q.Method)
		}
		switch q.View {
		case "", ViewStages, ViewHeat, ViewTokens:
			setIf("view", q.View)
		default:
			return nil, badQuery("view %q: want stages, heat or tokens", q.View)
		}
		if q.Method == "shapley" {
			off, err := parseDuration("baseline", q.Baseline)
			if err != nil {
				return nil, err
			}
			if off == 0 {
				return nil, badQuery("method shapley needs a baseline offset, e.g. 1d")
			}
			p.Set("baseline_start", formatUnix(dq.TimeRange.From.Add(-off)))
			p.Set("baseline_end", formatUnix(dq.TimeRange.To.Add(-off)))
		}
	case QueryTypeRootCause:
		if strings.TrimSpace(q.Target) == "" {
			return nil, badQuery("rootcause needs a target expression (the symptom series)")
		}
		setIf("target", q.Target)
		setIf("candidates", q.Candidates)
		if err := step(); err != nil {
			return nil, err
		}
		if q.ChangeAt != "" {
			t, err := parseTime(q.ChangeAt)
			if err != nil {
				return nil, badQuery("changeAt %q: %v", q.ChangeAt, err)
			}
			p.Set("change_at", formatUnix(t))
		}
		if err := level("alpha", q.Alpha); err != nil {
			return nil, err
		}
		if err := setLag(p, q.MaxLag); err != nil {
			return nil, err
		}
		switch q.View {
		case "", ViewRanking, ViewGraph:
		default:
			return nil, badQuery("view %q: want ranking or graph", q.View)
		}
	case QueryTypeCausal:
		if strings.TrimSpace(q.Outcome) == "" || strings.TrimSpace(q.Treatment) == "" {
			return nil, badQuery("causal needs an outcome and a treatment expression")
		}
		setIf("outcome", q.Outcome)
		setIf("treatment", q.Treatment)
		for _, c := range q.Confounders {
			if c = strings.TrimSpace(c); c != "" {
				p.Add("confounder", c)
			}
		}
		switch q.Method {
		case "", "backdoor", "granger", "ccf":
			setIf("method", q.Method)
		default:
			return nil, badQuery("method %q: want backdoor, granger or ccf", q.Method)
		}
		if err := level("level", q.Level); err != nil {
			return nil, err
		}
		if err := setLag(p, q.MaxLag); err != nil {
			return nil, err
		}
		if err := step(); err != nil {
			return nil, err
		}
	case QueryTypeAB:
		if strings.TrimSpace(q.A) == "" || strings.TrimSpace(q.B) == "" {
			return nil, badQuery("ab needs two selectors, a and b")
		}
		setIf("metric", q.Metric)
		setIf("a", q.A)
		setIf("b", q.B)
		if err := level("quantile", q.Quantile); err != nil {
			return nil, err
		}
		if err := level("level", q.Level); err != nil {
			return nil, err
		}
		switch q.CIMethod {
		case "", "order_statistic", "bootstrap", "maritz_jarrett", "delta":
			// The server refuses a method below its nominal coverage at
			// the query's quantile and request count (400 naming both).
			setIf("ci_method", q.CIMethod)
		default:
			return nil, badQuery("ciMethod %q: want order_statistic, bootstrap, maritz_jarrett or delta", q.CIMethod)
		}
	}
	return p, nil
}

func setLag(p url.Values, lag int) error {
	if lag < 0 || lag > 1000 {
		return badQuery("maxLag %d: want 0 (server default) to 1000 steps", lag)
	}
	if lag > 0 {
		p.Set("max_lag", strconv.Itoa(lag))
	}
	return nil
}

// parseTime accepts Unix seconds or RFC 3339.
func parseTime(s string) (time.Time, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.Abs(f) > 1e14 {
			return time.Time{}, errors.New("out of range")
		}
		return time.UnixMilli(int64(math.Round(f * 1000))).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, errors.New("want Unix seconds or RFC 3339")
	}
	return t, nil
}

// Number is a JSON number that may be null (NaN and ±Inf cannot travel in
// JSON, so the contract sends null). Valid is false for null or absent.
type Number struct {
	V     float64
	Valid bool
}

// UnmarshalJSON accepts a number, null, or a quoted number (the Prometheus
// API quotes floats; a server following its habits should still work).
func (n *Number) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		*n = Number{}
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		f, err := decodeFloatString(b)
		if err != nil {
			return err
		}
		*n = Number{V: f, Valid: !math.IsNaN(f)}
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("%s: want a number or null", truncate(string(b), 40))
	}
	*n = Number{V: f, Valid: true}
	return nil
}

// ptr returns the value as *float64, nil when not valid: the nullable form
// data frames use for missing cells.
func (n Number) ptr() *float64 {
	if !n.Valid {
		return nil
	}
	v := n.V
	return &v
}

// attributionFrames decodes the endpoint's data for the query's kind.
func attributionFrames(q *Query, raw json.RawMessage) (data.Frames, error) {
	var (
		frames data.Frames
		err    error
	)
	switch q.QueryType {
	case QueryTypeBreakdown:
		var b BreakdownResponse
		if err = decodeStrict(raw, &b); err == nil {
			frames, err = breakdownFrames(&b, q.View)
		}
	case QueryTypeRootCause:
		var r RootCauseResponse
		if err = decodeStrict(raw, &r); err == nil {
			frames, err = rootCauseFrames(&r, q.View)
		}
	case QueryTypeCausal:
		var c CausalResponse
		if err = decodeStrict(raw, &c); err == nil {
			frames, err = causalFrames(&c)
		}
	case QueryTypeAB:
		var a ABResponse
		if err = decodeStrict(raw, &a); err == nil {
			frames = abFrames(&a)
		}
	}
	if err != nil {
		// The server's answer does not follow CONTRACT.md.
		return nil, backend.DownstreamError(fmt.Errorf("%s answer: %w", q.QueryType, err))
	}
	return frames, nil
}

// decodeStrict decodes JSON into v; unknown members are allowed (the server
// may add fields), wrong types are not.
func decodeStrict(raw json.RawMessage, v any) error {
	if len(raw) == 0 || isNull(raw) {
		return errors.New("data is empty")
	}
	return json.Unmarshal(raw, v)
}
