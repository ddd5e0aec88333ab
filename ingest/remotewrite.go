package ingest

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/klauspost/compress/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/prometheus/model/metadata"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/internal/inflight"
	"github.com/tailroot/tailroot/internal/validation"
)

// Response headers of remote write 2.0 that tell the sender what was written.
const (
	headerSamplesWritten    = "X-Prometheus-Remote-Write-Samples-Written"
	headerHistogramsWritten = "X-Prometheus-Remote-Write-Histograms-Written"
	headerExemplarsWritten  = "X-Prometheus-Remote-Write-Exemplars-Written"
)

// MetadataSink receives the type, help and unit of metric families as
// writers report them.
type MetadataSink interface {
	Set(family string, m metadata.Metadata) error
}

// RemoteWrite is the POST /api/v1/write handler for Prometheus remote write
// 1.0 (prometheus.WriteRequest) and 2.0 (io.prometheus.write.v2.Request).
//
// Status codes: 204 when everything was written; 400 when the body is not
// snappy or not the protobuf its Content-Type names, or when some series or
// samples were rejected (the rest is committed, and the 2.0 headers count
// what was written); 413 when the body or series count is over a limit; 415
// for an unknown Content-Type, proto or Content-Encoding; 500 when the store
// failed, after rolling back, so the sender retries without duplicates.
type RemoteWrite struct {
	app    storage.AppendableV2
	md     MetadataSink
	opts   Options
	logger *slog.Logger
	cache  *seriesCache
	rules  validation.Rules

	bufs  sync.Pool // *[]byte, compressed and decoded bodies
	reqs1 sync.Pool // *v1Request
	reqs2 sync.Pool // *writev2.Request
	// dupPool holds *dupIndex, the per-request index of repeated series.
	dupPool sync.Pool

	requests *prometheus.CounterVec
	written  *prometheus.CounterVec
	rejected *prometheus.CounterVec
}

// NewRemoteWrite returns a handler appending to app. md may be nil, in which
// case metadata is dropped.
func NewRemoteWrite(app storage.AppendableV2, md MetadataSink, opts Options, logger *slog.Logger, reg prometheus.Registerer) *RemoteWrite {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	f := promauto.With(reg)
	return &RemoteWrite{
		app:    app,
		md:     md,
		opts:   opts.withDefaults(),
		logger: logger,
		cache:  newSeriesCache(opts.SeriesCacheSize),
		rules:  opts.Rules(),
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_remote_write_requests_total",
			Help: "Remote write requests by protocol version and HTTP status code.",
		}, []string{"version", "code"}),
		written: f.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_remote_write_written_total",
			Help: "Samples, histograms and exemplars written by remote write.",
		}, []string{"kind"}),
		rejected: f.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_remote_write_rejected_total",
			Help: "Samples and histograms rejected by remote write, by reason.",
		}, []string{"reason"}),
	}
}

func (h *RemoteWrite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "remote write requires POST", http.StatusMethodNotAllowed)
		return
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		h.fail(w, "", http.StatusUnsupportedMediaType, fmt.Errorf("%w: send application/x-protobuf", errNoContentType))
		return
	}
	msgType, err := remoteapi.ParseProtoMsg(ct)
	if err != nil {
		h.fail(w, "", http.StatusUnsupportedMediaType, fmt.Errorf("content type: %w", err))
		return
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "snappy" {
		h.fail(w, "", http.StatusUnsupportedMediaType, fmt.Errorf("content encoding %q is not accepted; only snappy is", enc))
		return
	}

	version := "1.0"
	if msgType == remoteapi.WriteV2MessageType {
		version = "2.0"
	}
	decoded, put, status, err := h.readBody(r)
	if err != nil {
		h.fail(w, version, status, err)
		return
	}
	defer put()

	var res result
	if version == "2.0" {
		req := h.getReq2()
		defer h.reqs2.Put(req)
		if err := req.Unmarshal(decoded); err != nil {
			h.fail(w, version, http.StatusBadRequest, fmt.Errorf("decode remote write 2.0 request: %w", err))
			return
		}
		if len(req.Timeseries) == 0 && len(decoded) > 0 {
			// gogo skips unknown fields: a 1.0 WriteRequest decodes as an
			// empty 2.0 request, and would be answered 204 with nothing
			// written.
			h.fail(w, version, http.StatusBadRequest, fmt.Errorf("the body has no remote write 2.0 series (%d bytes, Content-Type %q); is it a 1.0 WriteRequest sent with the 2.0 content type?", len(decoded), ct))
			return
		}
		if err := h.checkSeriesCount(len(req.Timeseries)); err != nil {
			h.fail(w, version, http.StatusRequestEntityTooLarge, err)
			return
		}
		res = h.appendV2(r.Context(), req)
	} else {
		req := h.getReq1()
		defer h.reqs1.Put(req)
		if err := req.decode(decoded); err != nil {
			h.fail(w, version, http.StatusBadRequest, fmt.Errorf("decode remote write 1.0 request: %w", err))
			return
		}
		if len(req.series) == 0 && len(req.metadata) == 0 && len(decoded) > 0 {
			h.fail(w, version, http.StatusBadRequest, fmt.Errorf("the body has no remote write 1.0 series or metadata (%d bytes, Content-Type %q); is it a 2.0 request sent with the 1.0 content type?", len(decoded), ct))
			return
		}
		if err := h.checkSeriesCount(len(req.series)); err != nil {
			h.fail(w, version, http.StatusRequestEntityTooLarge, err)
			return
		}
		res = h.appendV1(r.Context(), req)
	}

	h.written.WithLabelValues("sample").Add(float64(res.samples))
	h.written.WithLabelValues("histogram").Add(float64(res.histograms))
	h.written.WithLabelValues("exemplar").Add(float64(res.exemplars))
	if res.fatal == nil && version == "2.0" {
		wh := w.Header()
		wh.Set(headerSamplesWritten, strconv.Itoa(res.samples))
		wh.Set(headerHistogramsWritten, strconv.Itoa(res.histograms))
		wh.Set(headerExemplarsWritten, strconv.Itoa(res.exemplars))
	}
	switch {
	case res.fatal != nil:
		h.fail(w, version, storeStatus(w, res.fatal), res.fatal)
	case res.bad.count > 0:
		h.fail(w, version, http.StatusBadRequest, res.bad.err())
	default:
		h.requests.WithLabelValues(version, "204").Inc()
		w.WriteHeader(http.StatusNoContent)
	}
}

func (h *RemoteWrite) checkSeriesCount(n int) error {
	if h.opts.MaxSeriesPerRequest > 0 && n > h.opts.MaxSeriesPerRequest {
		return fmt.Errorf("request has %d series, over the limit of %d", n, h.opts.MaxSeriesPerRequest)
	}
	return nil
}

func (h *RemoteWrite) fail(w http.ResponseWriter, version string, status int, err error) {
	if version != "" {
		h.requests.WithLabelValues(version, strconv.Itoa(status)).Inc()
	}
	if status >= 500 {
		h.logger.Error("remote write failed", "err", err)
	} else {
		h.logger.Debug("remote write rejected", "status", status, "err", err)
	}
	retryAfter(w, status)
	http.Error(w, err.Error(), status)
}

// readBody reads and snappy-decodes the body into pooled buffers. put
// returns them; it must be called once the decoded bytes are no longer used.
func (h *RemoteWrite) readBody(r *http.Request) (decoded []byte, put func(), status int, err error) {
	limit := h.opts.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, nil, http.StatusRequestEntityTooLarge,
			fmt.Errorf("request body of %d bytes is over the limit of %d bytes", r.ContentLength, limit)
	}
	lease := inflight.FromContext(r.Context())
	cbuf := h.getBuf()
	buf := bytes.NewBuffer((*cbuf)[:0])
	if r.ContentLength > 0 {
		if err := lease.Grow(r.ContentLength); err != nil {
			h.bufs.Put(cbuf)
			return nil, nil, readStatus(err), fmt.Errorf("read request body: %w", err)
		}
		buf.Grow(int(r.ContentLength))
	}
	n, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	*cbuf = buf.Bytes()
	if err != nil {
		h.bufs.Put(cbuf)
		return nil, nil, readStatus(err), fmt.Errorf("read request body: %w", err)
	}
	if n > limit {
		h.bufs.Put(cbuf)
		return nil, nil, http.StatusRequestEntityTooLarge,
			fmt.Errorf("request body is over the limit of %d bytes", limit)
	}
	size, err := snappy.DecodedLen(*cbuf)
	if err != nil {
		h.bufs.Put(cbuf)
		return nil, nil, http.StatusBadRequest, fmt.Errorf("decode snappy body: %w", err)
	}
	if int64(size) > h.opts.MaxDecodedBytes {
		h.bufs.Put(cbuf)
		return nil, nil, http.StatusRequestEntityTooLarge,
			fmt.Errorf("decoded body of %d bytes is over the limit of %d bytes", size, h.opts.MaxDecodedBytes)
	}
	// The decoded body is leased before it is allocated, and once more for
	// the series, labels and samples decoded from it.
	if err := lease.Grow(2 * int64(size)); err != nil {
		h.bufs.Put(cbuf)
		return nil, nil, readStatus(err), fmt.Errorf("decode snappy body of %d bytes: %w", size, err)
	}
	dbuf := h.getBuf()
	if cap(*dbuf) < size {
		*dbuf = make([]byte, size)
	}
	out, err := snappy.Decode((*dbuf)[:size], *cbuf)
	h.bufs.Put(cbuf)
	if err != nil {
		h.bufs.Put(dbuf)
		return nil, nil, http.StatusBadRequest, fmt.Errorf("decode snappy body: %w", err)
	}
	return out, func() { h.bufs.Put(dbuf) }, 0, nil
}

func (h *RemoteWrite) getBuf() *[]byte {
	if b, ok := h.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 64<<10)
	return &b
}

// Decoded requests are reused: their slices keep their capacity.
func (h *RemoteWrite) getReq1() *v1Request {
	if r, ok := h.reqs1.Get().(*v1Request); ok {
		return r
	}
	return &v1Request{}
}

// getReq2 returns a reset 2.0 request: gogo's Unmarshal appends to the
// slices of a message, so resetting to zero length keeps their capacity.
func (h *RemoteWrite) getReq2() *writev2.Request {
	if r, ok := h.reqs2.Get().(*writev2.Request); ok {
		ts := r.Timeseries[:0]
		sym := r.Symbols[:0]
		*r = writev2.Request{Timeseries: ts, Symbols: sym}
		return r
	}
	return &writev2.Request{}
}
