package ingest

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/gorilla/mux"
	"github.com/klauspost/compress/gzip"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tailroot/tailroot/internal/httpapi"
	"github.com/tailroot/tailroot/internal/inflight"
	"github.com/tailroot/tailroot/query/qlimit"
	"github.com/tailroot/tailroot/tsdb/records"
)

// Register mounts the request-record endpoints on r: POST and GET
// /api/v1/requests. It must run before a catch-all for /api/v1/.
func (p *Records) Register(r *mux.Router) {
	r.HandleFunc("/api/v1/requests", p.ServePush).Methods(http.MethodPost)
	r.HandleFunc("/api/v1/requests", p.ServeQuery).Methods(http.MethodGet)
}

// writeAPIError answers err with the Prometheus error envelope, telling
// the sender of a 503 when to retry.
func writeAPIError(w http.ResponseWriter, code int, typ string, err error) {
	retryAfter(w, code)
	httpapi.WriteError(w, code, typ, err.Error())
}

// PushResult is the data of a POST /api/v1/requests response.
type PushResult struct {
	// Accepted is the number of requests stored.
	Accepted int `json:"accepted"`
	// Rejected lists bad lines (at most maxReportedLines of them);
	// RejectedCount counts them all.
	Rejected      []LineError `json:"rejected,omitempty"`
	RejectedCount int         `json:"rejectedCount"`
}

// LineError names a rejected line (1-based) and why.
type LineError struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

const maxReportedLines = 100

// ServePush is POST /api/v1/requests: NDJSON, one request per line
// (docs/requests.schema.json), optionally gzip-encoded.
//
// 200 when every line was stored; 400 listing the bad lines (number and
// reason) when some were not — the good lines are stored all the same, so
// a sender must not resend them; 413 when the body or the number of lines
// is over a limit (nothing stored); 415 for another Content-Type or
// Content-Encoding; 500 when the store failed (nothing of the body is
// acknowledged; resend it).
func (p *Records) ServePush(w http.ResponseWriter, r *http.Request) {
	{
		ct := r.Header.Get("Content-Type")
		mt, _, err := mime.ParseMediaType(ct)
		switch {
		case ct == "":
			writeAPIError(w, http.StatusUnsupportedMediaType, httpapi.ErrBadData, fmt.Errorf("%w: send application/x-ndjson", errNoContentType))
			return
		case err != nil:
			writeAPIError(w, http.StatusUnsupportedMediaType, httpapi.ErrBadData, fmt.Errorf("content type %q: %w", ct, err))
			return
		// text/plain is refused: a cross-site browser form or fetch may
		// send it without a CORS preflight.
		case mt != "application/x-ndjson" && mt != "application/jsonl" && mt != "application/json" && mt != "application/x-jsonlines":
			writeAPIError(w, http.StatusUnsupportedMediaType, httpapi.ErrBadData, fmt.Errorf("content type %q is not accepted; send application/x-ndjson", mt))
			return
		}
	}
	body, status, err := readBody(r, p.opts.MaxBodyBytes, p.opts.MaxDecodedBytes, 1)
	if err != nil {
		p.m.rejected.WithLabelValues("requests").Inc()
		writeAPIError(w, status, httpapi.ErrBadData, err)
		return
	}
	lines := bytes.Count(body, []byte{'\n'}) + 1
	if lines > p.opts.MaxRecordsPerRequest {
		// Only non-empty lines count; the cheap bound above is exact for
		// well-formed bodies and refuses early.
		n := 0
		for l := range bytes.SplitSeq(body, []byte{'\n'}) {
			if len(bytes.TrimSpace(l)) > 0 {
				n++
			}
		}
		if n > p.opts.MaxRecordsPerRequest {
			writeAPIError(w, http.StatusRequestEntityTooLarge, httpapi.ErrBadData,
				fmt.Errorf("body has %d requests, over the limit of %d per push", n, p.opts.MaxRecordsPerRequest))
			return
		}
	}
	var (
		res   PushResult
		items []Item
	)
	bad := func(line int, err error) {
		res.RejectedCount++
		if len(res.Rejected) < maxReportedLines {
			res.Rejected = append(res.Rejected, LineError{Line: line, Error: err.Error()})
		}
	}
	lineNo := 0
	for line := range bytes.SplitSeq(body, []byte{'\n'}) {
		lineNo++
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(line) > p.opts.MaxLineBytes {
			bad(lineNo, fmt.Errorf("line of %d bytes, over the limit of %d", len(line), p.opts.MaxLineBytes))
			continue
		}
		it, err := DecodeRequestLine(line, p.opts.Limits)
		if err == nil && !p.InRetention(it.Record.Time) {
			err = fmt.Errorf("arrival %s is older than the records retention", fmtNS(it.Record.Time*1e6))
		}
		if err != nil {
			bad(lineNo, err)
			continue
		}
		items = append(items, it)
	}
	if res.RejectedCount > 0 {
		p.m.rejected.WithLabelValues("requests").Add(float64(res.RejectedCount))
	}
	if err := p.Append(r.Context(), "requests", items); err != nil {
		code, typ := storeStatus(w, err), "internal"
		switch {
		case errors.Is(err, records.ErrOutOfRetention):
			code, typ = http.StatusBadRequest, "bad_data"
		case code == http.StatusTooManyRequests:
			typ = "too_many_requests"
		}
		writeAPIError(w, code, typ, fmt.Errorf("store requests: %w", err))
		return
	}
	res.Accepted = len(items)
	if res.RejectedCount > 0 {
		msg := make([]string, 0, min(len(res.Rejected), 10))
		for _, e := range res.Rejected[:min(len(res.Rejected), 10)] {
			msg = append(msg, fmt.Sprintf("line %d: %s", e.Line, e.Error))
		}
		more := ""
		if res.RejectedCount > len(msg) {
			more = fmt.Sprintf("; and %d more", res.RejectedCount-len(msg))
		}
		httpapi.Write(w, http.StatusBadRequest, httpapi.Response{
			Status: "error", ErrorType: httpapi.ErrBadData, Data: res,
			Error: fmt.Sprintf("%d of %d requests rejected (the other %d were stored): %s%s",
				res.RejectedCount, res.RejectedCount+res.Accepted, res.Accepted, strings.Join(msg, "; "), more),
		})
		return
	}
	httpapi.WriteData(w, res)
}

// readBody reads a pushed body within the limits, undoing gzip. status is
// the HTTP status that goes with err: 413 over a limit, 415 for an unknown
// Content-Encoding, 400 for a body that does not decode, and the
// in-flight limiter's status (503, 413) when the request's lease cannot
// grow. The decoded bytes are leased before they are allocated, and
// decodeFactor more times their size for the messages decoded from them.
func readBody(r *http.Request, maxBody, maxDecoded int64, decodeFactor int64) ([]byte, int, error) {
	enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	if enc != "" && enc != "identity" && enc != "gzip" {
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("content encoding %q is not accepted; send gzip or none", enc)
	}
	if r.ContentLength > maxBody {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body of %d bytes is over the limit of %d bytes", r.ContentLength, maxBody)
	}
	lease := inflight.FromContext(r.Context())
	raw, err := inflight.ReadAll(r.Body, lease, maxBody)
	if err != nil {
		return nil, readStatus(err), fmt.Errorf("read request body: %w", err)
	}
	if int64(len(raw)) > maxBody {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body is over the limit of %d bytes", maxBody)
	}
	out := raw
	if enc == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("decode gzip body: %w", err)
		}
		out, err = inflight.ReadAll(zr, lease, maxDecoded)
		if err != nil {
			return nil, readStatus(err), fmt.Errorf("decode gzip body: %w", err)
		}
		if int64(len(out)) > maxDecoded {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("decoded body is over the limit of %d bytes", maxDecoded)
		}
	}
	if err := lease.Grow(decodeFactor * int64(len(out))); err != nil {
		return nil, readStatus(err), fmt.Errorf("decode body of %d bytes: %w", len(out), err)
	}
	return out, 0, nil
}

// retryAfter tells the sender of a 503 when to try again: the in-flight
// limits and a failed store both clear by themselves.
func retryAfter(w http.ResponseWriter, code int) {
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", inflight.RetryAfter)
	}
}

// readStatus is 400 for a body that does not read or decode, or the
// limiter's status when a lease could not grow.
func readStatus(err error) int {
	if s, ok := inflight.StatusOf(err); ok {
		return s
	}
	return http.StatusBadRequest
}

// RecordJSON is a request record as GET /api/v1/requests returns it.
// Durations are seconds; Time is the arrival, Unix milliseconds.
type RecordJSON struct {
	Time          int64             `json:"time"`
	Labels        map[string]string `json:"labels"`
	TraceID       string            `json:"trace_id,omitempty"`
	RequestID     string            `json:"request_id,omitempty"`
	E2E           float64           `json:"e2e"`
	Stages        StagesJSON        `json:"stages"`
	TTFT          float64           `json:"ttft"`
	PromptTokens  uint32            `json:"prompt_tokens"`
	OutputTokens  uint32            `json:"output_tokens"`
	PromptEntropy float64           `json:"prompt_entropy"`
	ITL           *ITLJSON          `json:"itl,omitempty"`
}

// StagesJSON are the canonical stages in record order.
type StagesJSON struct {
	Queue      float64 `json:"queue"`
	Tokenize   float64 `json:"tokenize"`
	Prefill    float64 `json:"prefill"`
	Decode     float64 `json:"decode"`
	Detokenize float64 `json:"detokenize"`
	Network    float64 `json:"network"`
	Other      float64 `json:"other"`
}

// Array returns the stages indexed by records.Stage.
func (s StagesJSON) Array() [records.NumStages]float64 {
	return [records.NumStages]float64{s.Queue, s.Tokenize, s.Prefill, s.Decode, s.Detokenize, s.Network, s.Other}
}

// ITLJSON is the inter-token latency summary; Values holds every gap when
// the record kept them.
type ITLJSON struct {
	Count  uint32    `json:"count"`
	Sum    float64   `json:"sum"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	P50    float64   `json:"p50"`
	P90    float64   `json:"p90"`
	P99    float64   `json:"p99"`
	Values []float64 `json:"values,omitempty"`
}

// NewRecordJSON converts a record for the read API.
func NewRecordJSON(r *records.Record) RecordJSON {
	out := RecordJSON{
		Time: r.Time, Labels: r.Labels.Map(), RequestID: r.RequestID, E2E: r.E2E, TTFT: r.TTFT,
		PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens, PromptEntropy: r.PromptEntropy,
	}
	if !r.TraceID.IsZero() {
		out.TraceID = hex.EncodeToString(r.TraceID[:])
	}
	s := &r.Stages
	out.Stages = StagesJSON{s[0], s[1], s[2], s[3], s[4], s[5], s[6]}
	if r.ITL.Count > 0 {
		it := r.ITL
		out.ITL = &ITLJSON{Count: it.Count, Sum: it.Sum, Min: it.Min, Max: it.Max, P50: it.P50, P90: it.P90, P99: it.P99, Values: it.Values}
	}
	return out
}

// selectorParser reads match[] of GET /api/v1/requests, within the query
// limits the engine applies, so a hostile selector costs no more here.
var selectorParser = qlimit.Parser{Parser: parser.NewParser(parser.Options{}), Limits: qlimit.DefaultLimits()}

// ServeQuery is GET /api/v1/requests?match[]=…&start=…&end=…&limit=…:
// the records with start ≤ arrival ≤ end (Prometheus time formats: Unix
// seconds or RFC 3339; default: all time) whose labels match any match[]
// selector (default: all), in time order, at most limit (default and cap
// MaxQueryRecords). The answer is the Prometheus envelope with data a
// JSON array of RecordJSON, or, with format=ndjson or Accept:
// application/x-ndjson, one RecordJSON per line and nothing else. A limit
// that cut the answer short is reported as a warning (JSON) or the header
// X-Tailroot-Truncated: true (NDJSON); the store is read one record past
// the limit to know.
func (p *Records) ServeQuery(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeAPIError(w, http.StatusBadRequest, httpapi.ErrBadData, fmt.Errorf("parse query: %w", err))
		return
	}
	mint, maxt := int64(math.MinInt64), int64(math.MaxInt64)
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"start", &mint}, {"end", &maxt}} {
		if v := r.Form.Get(f.name); v != "" {
			t, err := httpapi.ParseTime(v)
			if err != nil {
				writeAPIError(w, http.StatusBadRequest, httpapi.ErrBadData, fmt.Errorf("%s=%q: %w", f.name, v, err))
				return
			}
			*f.dst = t.UnixMilli()
		}
	}
	if mint > maxt {
		writeAPIError(w, http.StatusBadRequest, httpapi.ErrBadData, errors.New("end is before start"))
		return
	}
	limit := p.opts.MaxQueryRecords
	if v := r.Form.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeAPIError(w, http.StatusBadRequest, httpapi.ErrBadData, fmt.Errorf("limit %q is not a non-negative integer", v))
			return
		}
		if n > 0 {
			limit = min(n, limit)
		}
	}
	sets, err := selectorParser.ParseMetricSelectors(r.Form["match[]"])
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, httpapi.ErrBadData, fmt.Errorf("match[]: %w", err))
		return
	}
	var pushDown []*labels.Matcher
	if len(sets) == 1 {
		pushDown = sets[0]
	}
	// TenantSource confines the selection to the request's tenant
	// (tenancy on) and reads the store unchanged otherwise.
	it := records.TenantSource(p.store).Select(r.Context(), mint, maxt, pushDown...)
	defer it.Close()
	next := func() (records.Record, bool) {
		for it.Next() {
			rec := it.At()
			if len(sets) <= 1 || matchesAny(rec.Labels, sets) {
				return rec, true
			}
		}
		return records.Record{}, false
	}

	ndjson := r.Form.Get("format") == "ndjson" || strings.Contains(r.Header.Get("Accept"), "application/x-ndjson")
	// Read one record ahead so a truncation is known before it is written.
	var buf []RecordJSON
	truncated := false
	for {
		rec, ok := next()
		if !ok {
			break
		}
		if len(buf) == limit {
			truncated = true
			break
		}
		buf = append(buf, NewRecordJSON(&rec))
	}
	if err := it.Err(); err != nil {
		writeAPIError(w, http.StatusInternalServerError, httpapi.ErrInternal, fmt.Errorf("read records: %w", err))
		return
	}
	if ndjson {
		w.Header().Set("Content-Type", "application/x-ndjson")
		if truncated {
			w.Header().Set("X-Tailroot-Truncated", "true")
		}
		bw := bufio.NewWriterSize(w, 64<<10)
		enc := json.NewEncoder(bw)
		for i := range buf {
			_ = enc.Encode(&buf[i])
		}
		_ = bw.Flush()
		return
	}
	if buf == nil {
		buf = []RecordJSON{}
	}
	var warnings []string
	if truncated {
		warnings = []string{fmt.Sprintf("result truncated to %d records; narrow the time range or raise limit", limit)}
	}
	httpapi.WriteData(w, buf, warnings...)
}

func matchesAny(ls labels.Labels, sets [][]*labels.Matcher) bool {
	for _, set := range sets {
		ok := true
		for _, m := range set {
			if !m.Matches(ls.Get(m.Name)) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
