package plugin

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/data"
)

// maxPoints caps points per series the way Prometheus does (11,000): the
// step grows with the range so a year-long panel still runs.
const maxPoints = 11000

// runPromQL runs a PromQL or MetricsQL query as a range query, an instant
// query, or both (range frames first), and converts the answer to frames.
func (d *Datasource) runPromQL(ctx context.Context, q *Query, dq backend.DataQuery) (backend.DataResponse, error) {
	expr := strings.TrimSpace(q.Expr)
	if expr == "" {
		return backend.DataResponse{}, badQuery("expr is empty: write a PromQL or MetricsQL expression")
	}
	switch q.Format {
	case "", FormatTimeSeries, FormatTable, FormatHeatmap:
	default:
		return backend.DataResponse{}, badQuery("format %q: want time_series, table or heatmap", q.Format)
	}
	if !q.Instant && !q.Range {
		q.Range = true
	}
	var resp backend.DataResponse
	if q.Range {
		step, err := rangeStep(q, dq)
		if err != nil {
			return resp, err
		}
		start, end := alignRange(dq.TimeRange, step)
		env, err := d.client.get(ctx, "/api/v1/query_range", url.Values{
			"query":   {expr},
			"dialect": {"metricsql"},
			"start":   {formatUnix(start)},
			"end":     {formatUnix(end)},
			"step":    {formatSeconds(step)},
		})
		if err != nil {
			return resp, err
		}
		frames, err := resultFrames(env, q, fmt.Sprintf("Expr: %s\nStep: %s", expr, step))
		if err != nil {
			return resp, err
		}
		resp.Frames = append(resp.Frames, frames...)
	}
	if q.Instant {
		env, err := d.client.get(ctx, "/api/v1/query", url.Values{
			"query":   {expr},
			"dialect": {"metricsql"},
			"time":    {formatUnix(dq.TimeRange.To)},
		})
		if err != nil {
			return resp, err
		}
		frames, err := resultFrames(env, q, "Expr: "+expr)
		if err != nil {
			return resp, err
		}
		resp.Frames = append(resp.Frames, frames...)
	}
	return resp, nil
}

// rangeStep is the query's step: the largest of its own minimum step (or
// Grafana's interval when it has none), range/maxDataPoints and
// range/maxPoints, at least 1 ms, rounded to whole milliseconds.
func rangeStep(q *Query, dq backend.DataQuery) (time.Duration, error) {
	step, err := parseDuration("step", q.Step)
	if err != nil {
		return 0, err
	}
	if step == 0 {
		step = dq.Interval
	}
	r := dq.TimeRange.Duration()
	if r <= 0 {
		return 0, badQuery("time range %s to %s is empty", dq.TimeRange.From.UTC().Format(time.RFC3339), dq.TimeRange.To.UTC().Format(time.RFC3339))
	}
	if dq.MaxDataPoints > 0 {
		step = max(step, r/time.Duration(dq.MaxDataPoints))
	}
	step = max(step, r/maxPoints, time.Millisecond)
	return step.Round(time.Millisecond), nil
}

// alignRange aligns the range to multiples of step (as Grafana's Prometheus
// datasource does) so panels refreshed a few seconds apart evaluate on the
// same grid and their points do not jitter.
func alignRange(tr backend.TimeRange, step time.Duration) (time.Time, time.Time) {
	s := step.Milliseconds()
	from := tr.From.UnixMilli() / s * s
	to := tr.To.UnixMilli() / s * s
	if to < from {
		to = from
	}
	return time.UnixMilli(from).UTC(), time.UnixMilli(to).UTC()
}

// resultFrames decodes a query answer and converts it into frames according
// to the query's format, attaching the server's warnings and infos as
// notices.
func resultFrames(env *envelope, q *Query, executed string) (data.Frames, error) {
	res, err := decodeResult(env.Data)
	if err != nil {
		return nil, backend.DownstreamError(fmt.Errorf("decode query result: %w", err))
	}
	frames, err := convertResult(res, q)
	if err != nil {
		return nil, err
	}
	var notices []data.Notice
	for _, w := range env.Warnings {
		notices = append(notices, data.Notice{Severity: data.NoticeSeverityWarning, Text: w})
	}
	for _, i := range env.Infos {
		notices = append(notices, data.Notice{Severity: data.NoticeSeverityInfo, Text: i})
	}
	if len(frames) == 0 && len(notices) > 0 {
		frames = data.Frames{data.NewFrame("")}
	}
	for i, f := range frames {
		if f.Meta == nil {
			f.Meta = &data.FrameMeta{}
		}
		f.Meta.ExecutedQueryString = executed
		if i == 0 {
			f.Meta.Notices = append(f.Meta.Notices, notices...)
		}
	}
	return frames, nil
}
