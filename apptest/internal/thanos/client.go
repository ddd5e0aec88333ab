package thanos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
)

// RemoteWrite sends series to a Prometheus remote-write 1.0 endpoint
// (baseURL + /api/v1/write) and fails the test unless it answers 2xx.
func RemoteWrite(t testing.TB, baseURL string, series map[string]*prompb.TimeSeries) {
	t.Helper()
	keys := make([]string, 0, len(series))
	for k := range series {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	req := &prompb.WriteRequest{Timeseries: make([]prompb.TimeSeries, 0, len(keys))}
	for _, k := range keys {
		req.Timeseries = append(req.Timeseries, *series[k])
	}
	raw, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	hr, err := http.NewRequest(http.MethodPost, baseURL+"/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Content-Type", "application/x-protobuf")
	hr.Header.Set("Content-Encoding", "snappy")
	hr.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatalf("remote write to %s: %v", baseURL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("remote write to %s: %d %s", baseURL, resp.StatusCode, body)
	}
}

// Target is one server's share of a backfill: the workload generated for it.
type Target struct {
	URL string
	Gen *Generator
}

// Backfill writes each target's workload over [from, to) in time order,
// window by window (each request holds every series' samples of one
// window; every target gets window k before any gets window k+1), the way
// servers catching up on history receive it. The head of a server accepts
// samples only near its newest, so one server fed by several targets must
// get them interleaved like this.
func Backfill(t testing.TB, targets []Target, from, to time.Time, window time.Duration) {
	t.Helper()
	for w := from; w.Before(to); w = w.Add(window) {
		end := w.Add(window)
		if end.After(to) {
			end = to
		}
		for _, tg := range targets {
			series := map[string]*prompb.TimeSeries{}
			tg.Gen.Append(series, w, end)
			RemoteWrite(t, tg.URL, series)
		}
	}
}

// API is a Prometheus HTTP API client for tailroot and Thanos Query alike.
type API struct{ URL string }

// Series is one series of a query result: one point for a vector, many for
// a matrix.
type Series struct {
	Metric map[string]string
	Points []Point
}

// Point is a float sample or a native histogram (H non-nil).
type Point struct {
	T float64
	V float64
	H *Histogram
}

// Histogram is a native histogram as the Prometheus API renders it.
type Histogram struct {
	Count, Sum float64
	Buckets    [][4]float64 // boundary rule, lower, upper, count
}

// Result is a decoded query answer, its series sorted by labels.
type Result struct {
	Type     string
	Series   []Series
	Warnings []string
}

// Instant runs an instant query at ts; extra adds parameters (for Thanos
// Query: max_source_resolution, partial_response, dedup).
func (a API) Instant(t testing.TB, q string, ts time.Time, extra url.Values) Result {
	t.Helper()
	v := url.Values{"query": {q}, "time": {fmtTime(ts)}}
	for k, x := range extra {
		v[k] = x
	}
	return a.do(t, "/api/v1/query", v)
}

// Range runs a range query.
func (a API) Range(t testing.TB, q string, start, end time.Time, step time.Duration, extra url.Values) Result {
	t.Helper()
	v := url.Values{"query": {q}, "start": {fmtTime(start)}, "end": {fmtTime(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	for k, x := range extra {
		v[k] = x
	}
	return a.do(t, "/api/v1/query_range", v)
}

func fmtTime(ts time.Time) string {
	return strconv.FormatFloat(float64(ts.UnixMilli())/1000, 'f', 3, 64)
}

func (a API) do(t testing.TB, path string, v url.Values) Result {
	t.Helper()
	resp, err := http.PostForm(a.URL+path, v)
	if err != nil {
		t.Fatalf("%s %s: %v", a.URL, v.Get("query"), err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var env struct {
		Status   string   `json:"status"`
		Error    string   `json:"error"`
		Warnings []string `json:"warnings"`
		Data     struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric     map[string]string `json:"metric"`
				Value      []any             `json:"value"`
				Values     [][]any           `json:"values"`
				Histogram  []any             `json:"histogram"`
				Histograms [][]any           `json:"histograms"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil || resp.StatusCode != http.StatusOK || env.Status != "success" {
		t.Fatalf("%s%s query %q: %d %s (%v)", a.URL, path, v.Get("query"), resp.StatusCode, body, err)
	}
	r := Result{Type: env.Data.ResultType, Warnings: env.Warnings}
	for _, s := range env.Data.Result {
		out := Series{Metric: s.Metric}
		if s.Value != nil {
			out.Points = append(out.Points, floatPoint(t, s.Value))
		}
		for _, p := range s.Values {
			out.Points = append(out.Points, floatPoint(t, p))
		}
		if s.Histogram != nil {
			out.Points = append(out.Points, histPoint(t, s.Histogram))
		}
		for _, p := range s.Histograms {
			out.Points = append(out.Points, histPoint(t, p))
		}
		sort.Slice(out.Points, func(i, j int) bool { return out.Points[i].T < out.Points[j].T })
		r.Series = append(r.Series, out)
	}
	sort.Slice(r.Series, func(i, j int) bool { return labelKey(r.Series[i].Metric) < labelKey(r.Series[j].Metric) })
	return r
}

func floatPoint(t testing.TB, p []any) Point {
	t.Helper()
	ts, _ := p[0].(float64)
	s, _ := p[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("sample value %v: %v", p, err)
	}
	return Point{T: ts, V: v}
}

func histPoint(t testing.TB, p []any) Point {
	t.Helper()
	ts, _ := p[0].(float64)
	raw, _ := json.Marshal(p[1])
	var h struct {
		Count   string  `json:"count"`
		Sum     string  `json:"sum"`
		Buckets [][]any `json:"buckets"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatalf("histogram %s: %v", raw, err)
	}
	out := &Histogram{Count: num(t, h.Count), Sum: num(t, h.Sum)}
	for _, b := range h.Buckets {
		rule, _ := b[0].(float64)
		out.Buckets = append(out.Buckets, [4]float64{rule, num(t, b[1]), num(t, b[2]), num(t, b[3])})
	}
	return Point{T: ts, H: out}
}

func num(t testing.TB, v any) float64 {
	t.Helper()
	s, _ := v.(string)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("number %v: %v", v, err)
	}
	return f
}

func labelKey(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q,", k, m[k])
	}
	return b.String()
}

// Points counts the points of a result.
func (r Result) Points() int {
	n := 0
	for _, s := range r.Series {
		n += len(s.Points)
	}
	return n
}

// Diff compares two results: the same series (by labels), the same
// timestamps, and values within relTol relative error (0 asks for exact
// equality; NaN equals NaN). It returns "" when they agree, otherwise the
// first difference, and the largest relative difference seen.
func Diff(a, b Result, relTol float64) (diff string, maxRel float64) {
	if a.Type != b.Type {
		return fmt.Sprintf("result type %s vs %s", a.Type, b.Type), 0
	}
	if len(a.Series) != len(b.Series) {
		return fmt.Sprintf("%d series vs %d: %v vs %v", len(a.Series), len(b.Series), metrics(a), metrics(b)), 0
	}
	for i := range a.Series {
		sa, sb := a.Series[i], b.Series[i]
		if labelKey(sa.Metric) != labelKey(sb.Metric) {
			return fmt.Sprintf("series %d: %v vs %v", i, sa.Metric, sb.Metric), maxRel
		}
		if len(sa.Points) != len(sb.Points) {
			return fmt.Sprintf("%v: %d points vs %d", sa.Metric, len(sa.Points), len(sb.Points)), maxRel
		}
		for j := range sa.Points {
			pa, pb := sa.Points[j], sb.Points[j]
			if pa.T != pb.T {
				return fmt.Sprintf("%v point %d: time %v vs %v", sa.Metric, j, pa.T, pb.T), maxRel
			}
			va, vb := pointValues(pa), pointValues(pb)
			if len(va) != len(vb) {
				return fmt.Sprintf("%v at %v: %v vs %v", sa.Metric, pa.T, pa, pb), maxRel
			}
			for k := range va {
				r := relDiff(va[k], vb[k])
				maxRel = math.Max(maxRel, r)
				if r > relTol {
					return fmt.Sprintf("%v at %v: %v vs %v (relative difference %.3g)", sa.Metric, pa.T, va[k], vb[k], r), maxRel
				}
			}
		}
	}
	return "", maxRel
}

func metrics(r Result) []map[string]string {
	out := make([]map[string]string, 0, len(r.Series))
	for _, s := range r.Series {
		out = append(out, s.Metric)
	}
	return out
}

func pointValues(p Point) []float64 {
	if p.H == nil {
		return []float64{p.V}
	}
	v := []float64{p.H.Count, p.H.Sum}
	for _, b := range p.H.Buckets {
		v = append(v, b[:]...)
	}
	return v
}

// relDiff is |a−b| / max(|a|, |b|), 0 for equal values (NaN equals NaN,
// equal infinities are equal).
func relDiff(a, b float64) float64 {
	if a == b || (math.IsNaN(a) && math.IsNaN(b)) {
		return 0
	}
	if math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return math.Inf(1)
	}
	return math.Abs(a-b) / math.Max(math.Abs(a), math.Abs(b))
}

// Labels returns /api/v1/labels (path "labels") or the values of one label
// (path "label/<name>/values") over [start, end], optionally restricted by
// series selectors.
func (a API) Labels(t testing.TB, path string, start, end time.Time, match ...string) []string {
	t.Helper()
	v := url.Values{"start": {fmtTime(start)}, "end": {fmtTime(end)}}
	for _, m := range match {
		v.Add("match[]", m)
	}
	resp, err := http.Get(a.URL + "/api/v1/" + path + "?" + v.Encode())
	if err != nil {
		t.Fatalf("%s %s: %v", a.URL, path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var env struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil || resp.StatusCode != http.StatusOK || env.Status != "success" {
		t.Fatalf("%s/api/v1/%s: %d %s (%v)", a.URL, path, resp.StatusCode, body, err)
	}
	sort.Strings(env.Data)
	return env.Data
}
