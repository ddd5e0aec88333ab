package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/common/model"
	"github.com/prometheus/otlptranslator"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/timestamp"
	"github.com/prometheus/prometheus/storage"
	promotlp "github.com/prometheus/prometheus/storage/remote/otlptranslator/prometheusremotewrite"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/tailroot/tailroot/internal/validation"
)

// OTLPOptions configure the OTLP metrics handler. Zero values mean the
// default noted on each field.
type OTLPOptions struct {
	// MaxBodyBytes caps the body as sent; 413 above. Zero means 32 MiB.
	MaxBodyBytes int64
	// MaxDecodedBytes caps the gzip-decoded body; 413 above. Zero means
	// 4 × MaxBodyBytes.
	MaxDecodedBytes int64
	// MaxDataPoints refuses a request with more data points with 413.
	// Zero means no limit.
	MaxDataPoints int
	// PromoteResourceAttributes become labels of every series of their
	// resource, as Prometheus' otlp.promote_resource_attributes.
	PromoteResourceAttributes []string
	// PromoteAllResourceAttributes promotes every resource attribute.
	PromoteAllResourceAttributes bool
	// KeepIdentifyingResourceAttributes keeps service.name,
	// service.namespace and service.instance.id on target_info as well as
	// in job and instance.
	KeepIdentifyingResourceAttributes bool
	// TranslationStrategy names metrics and labels; the zero value means
	// UnderscoreEscapingWithSuffixes, the Prometheus 3 default.
	TranslationStrategy otlptranslator.TranslationStrategyOption
	// ConvertHistogramsToNHCB stores explicit-bucket histograms as native
	// histograms with custom buckets (Prometheus'
	// otlp.convert_histograms_to_nhcb). The default (false) stores them as
	// classic _bucket/_sum/_count series, as Prometheus does, so
	// histogram_quantile(…, rate(x_bucket[5m])) works as users write it.
	// Exponential histograms are always native histograms.
	ConvertHistogramsToNHCB bool
	// MaxFutureSkew rejects samples further ahead of the server clock.
	// Zero means 10 minutes.
	MaxFutureSkew time.Duration
	// Rules are the label rules every ingest path shares; the zero value
	// checks only UTF-8 and empty names. `tailroot serve` passes the remote
	// write limits (Options.Rules).
	Rules validation.Rules
}

func (o OTLPOptions) withDefaults() OTLPOptions {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 32 << 20
	}
	if o.MaxDecodedBytes <= 0 {
		o.MaxDecodedBytes = 4 * o.MaxBodyBytes
	}
	if o.TranslationStrategy == "" {
		o.TranslationStrategy = otlptranslator.UnderscoreEscapingWithSuffixes
	}
	if o.MaxFutureSkew <= 0 {
		o.MaxFutureSkew = 10 * time.Minute
	}
	return o
}

// OTLPMetrics is the POST /api/v1/otlp/v1/metrics handler (OTLP/HTTP
// metrics, protobuf or JSON, optionally gzip). Translation is Prometheus
// 3's own (storage/remote/otlptranslator): metric names with unit and type
// suffixes, job and instance from service.namespace/service.name and
// service.instance.id, the other resource attributes on target_info (or
// promoted to labels when configured), sums and gauges as floats,
// exponential histograms as native histograms and explicit-bucket
// histograms as classic histograms (or native histograms with custom
// buckets, with ConvertHistogramsToNHCB), exemplars with their trace ids.
//
// Unlike the upstream handler, a sample the store refuses (out of order,
// too old, too far in the future, an invalid histogram) does not fail the
// request: the other samples are committed and the response is 200 with
// partial_success counting and naming the rejected data points, as
// OTLP/HTTP prescribes. 400 for a body that does not decode, 413 over a
// limit, 415 for another Content-Type or Content-Encoding, 500 when the
// store failed (everything is rolled back; the exporter retries).
type OTLPMetrics struct {
	app    storage.AppendableV2
	md     MetadataSink
	opts   OTLPOptions
	cfg    config.OTLPConfig
	logger *slog.Logger

	converters sync.Pool

	requests *prometheus.CounterVec
	written  *prometheus.CounterVec
	rejected *prometheus.CounterVec
}

// NewOTLPMetrics returns the handler appending to app; md, if not nil,
// receives metric metadata.
func NewOTLPMetrics(app storage.AppendableV2, md MetadataSink, opts OTLPOptions, logger *slog.Logger, reg prometheus.Registerer) *OTLPMetrics {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts = opts.withDefaults()
	f := promauto.With(reg)
	h := &OTLPMetrics{
		app: app, md: md, opts: opts, logger: logger,
		cfg: config.OTLPConfig{
			PromoteAllResourceAttributes:      opts.PromoteAllResourceAttributes,
			PromoteResourceAttributes:         opts.PromoteResourceAttributes,
			TranslationStrategy:               opts.TranslationStrategy,
			KeepIdentifyingResourceAttributes: opts.KeepIdentifyingResourceAttributes,
			ConvertHistogramsToNHCB:           opts.ConvertHistogramsToNHCB,
		},
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_otlp_metrics_requests_total",
			Help: "OTLP metrics requests by HTTP status code.",
		}, []string{"code"}),
		written: f.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_otlp_metrics_written_total",
			Help: "Samples and histograms written from OTLP metrics.",
		}, []string{"kind"}),
		rejected: f.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_otlp_metrics_rejected_total",
			Help: "OTLP samples rejected, by reason.",
		}, []string{"reason"}),
	}
	h.converters.New = func() any { return promotlp.NewPrometheusConverter(nil) }
	return h
}

func (h *OTLPMetrics) fail(w http.ResponseWriter, f otlpFormat, code int, err error) {
	h.requests.WithLabelValues(fmt.Sprint(code)).Inc()
	if code >= 500 {
		h.logger.Error("otlp metrics failed", "err", err)
	}
	writeOTLPError(w, f, code, err)
}

func (h *OTLPMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "OTLP metrics require POST", http.StatusMethodNotAllowed)
		return
	}
	f, err := parseOTLPContentType(r.Header.Get("Content-Type"))
	if err != nil {
		h.fail(w, otlpProto, http.StatusUnsupportedMediaType, err)
		return
	}
	body, status, err := readBody(r, h.opts.MaxBodyBytes, h.opts.MaxDecodedBytes, 2)
	if err != nil {
		h.fail(w, f, status, err)
		return
	}
	req := pmetricotlp.NewExportRequest()
	if f == otlpJSON {
		err = req.UnmarshalJSON(body)
	} else {
		err = req.UnmarshalProto(body)
	}
	if err != nil {
		h.fail(w, f, http.StatusBadRequest, fmt.Errorf("decode OTLP metrics: %w", err))
		return
	}
	md := req.Metrics()
	untranslatable := untranslatablePoints(md)
	if n := md.DataPointCount(); h.opts.MaxDataPoints > 0 && n > h.opts.MaxDataPoints {
		h.fail(w, f, http.StatusRequestEntityTooLarge, fmt.Errorf("request has %d data points, over the limit of %d", n, h.opts.MaxDataPoints))
		return
	}
	var pre badList
	h.checkOTLP(md, &pre)

	app := &otlpAppender{
		AppenderV2: h.app.AppenderV2(r.Context()),
		h:          h,
		maxTime:    timestamp.FromTime(time.Now().Add(h.opts.MaxFutureSkew)),
		families:   map[string]bool{},
		bad:        pre,
	}
	conv := h.converters.Get().(*promotlp.PrometheusConverter)
	conv.Reset(app)
	annots, convErr := conv.FromMetrics(r.Context(), md, promotlp.Settings{
		AddMetricSuffixes:                 h.cfg.TranslationStrategy.ShouldAddSuffixes(),
		AllowUTF8:                         !h.cfg.TranslationStrategy.ShouldEscape(),
		PromoteResourceAttributes:         promotlp.NewPromoteResourceAttributes(h.cfg),
		KeepIdentifyingResourceAttributes: h.cfg.KeepIdentifyingResourceAttributes,
		ConvertHistogramsToNHCB:           h.cfg.ConvertHistogramsToNHCB,
		LookbackDelta:                     5 * time.Minute,
	})
	conv.Reset(nil)
	h.converters.Put(conv)

	if app.fatal != nil || errors.Is(convErr, context.Canceled) || errors.Is(convErr, context.DeadlineExceeded) {
		_ = app.Rollback()
		err := app.fatal
		if err == nil {
			err = convErr
		}
		h.fail(w, f, storeStatus(w, err), fmt.Errorf("append OTLP metrics: %w", err))
		return
	}
	if app.data == 0 {
		// Nothing of the request's metrics was written: its resources'
		// target_info samples are not written either.
		_ = app.Rollback()
		app.samples, app.histograms = 0, 0
	} else if err := app.Commit(); err != nil {
		h.fail(w, f, storeStatus(w, err), fmt.Errorf("commit OTLP metrics: %w", err))
		return
	}
	h.written.WithLabelValues("sample").Add(float64(app.samples))
	h.written.WithLabelValues("histogram").Add(float64(app.histograms))

	// Translation errors (a delta metric, an unsupported type, a name that
	// does not translate) drop that metric; the rest was written.
	msgs := app.bad.first
	// rejected_data_points counts every point not stored, those of metrics
	// the translator drops (delta temporality, no type) included, as the
	// OTLP specification requires.
	rejected := app.bad.count + untranslatable
	if convErr != nil {
		for _, e := range splitJoined(convErr) {
			msgs = append(msgs, e.Error())
		}
		h.rejected.WithLabelValues("translation").Add(float64(len(splitJoined(convErr))))
	}
	if ws, _ := annots.AsStrings("", 0, 0); len(ws) > 0 {
		h.logger.Debug("otlp translation warnings", "warnings", ws)
	}
	resp := pmetricotlp.NewExportResponse()
	if len(msgs) > 0 {
		ps := resp.PartialSuccess()
		ps.SetRejectedDataPoints(int64(rejected))
		msg := strings.Join(msgs[:min(len(msgs), maxReportedErrors)], "; ")
		if extra := rejected - len(app.bad.first); extra > 0 {
			msg += fmt.Sprintf("; and %d more", extra)
		}
		ps.SetErrorMessage(msg)
	}
	var out []byte
	if f == otlpJSON {
		out, err = resp.MarshalJSON()
	} else {
		out, err = resp.MarshalProto()
	}
	if err != nil {
		h.fail(w, f, http.StatusInternalServerError, err)
		return
	}
	h.requests.WithLabelValues("200").Inc()
	w.Header().Set("Content-Type", f.contentType())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// otlpAppender sits between the translator and the store: it turns a
// sample the store refuses into a reported rejection (so the translator
// carries on with the rest), records metadata, and stops at the first
// store failure.
type otlpAppender struct {
	storage.AppenderV2
	h        *OTLPMetrics
	maxTime  int64
	families map[string]bool

	samples, histograms int
	// data counts the samples written for metrics, not for target_info:
	// a request none of whose points were written leaves no target_info
	// either.
	data  int
	bad   badList
	fatal error
}

func (a *otlpAppender) Append(ref storage.SeriesRef, ls labels.Labels, st, t int64, v float64, hi *histogram.Histogram, fh *histogram.FloatHistogram, opts storage.AOptions) (storage.SeriesRef, error) {
	if a.fatal != nil {
		return 0, a.fatal
	}
	if t > a.maxTime {
		a.reject("too_far_in_future", ls, t, fmt.Errorf("timestamp is more than %s ahead of the server clock", a.h.opts.MaxFutureSkew))
		return 0, nil
	}
	if err := a.h.opts.Rules.Labels(ls); err != nil {
		a.reject("invalid_labels", ls, t, otlpLabelsError(err))
		return 0, nil
	}
	if a.h.md != nil && opts.MetricFamilyName != "" && !a.families[opts.MetricFamilyName] {
		a.families[opts.MetricFamilyName] = true
		if err := a.h.md.Set(opts.MetricFamilyName, opts.Metadata); err != nil {
			a.fatal = fmt.Errorf("store metadata: %w", err)
			return 0, a.fatal
		}
	}
	nref, err := a.AppenderV2.Append(ref, ls, st, t, v, hi, fh, opts)
	if err != nil {
		var pe *storage.AppendPartialError
		if _, herr := pe.Handle(err); herr == nil {
			err = nil // only exemplars failed; Prometheus treats them as best effort
		}
	}
	if err == nil {
		if ls.Get(model.MetricNameLabel) != "target_info" {
			a.data++
		}
		if hi != nil || fh != nil {
			a.histograms++
		} else {
			a.samples++
		}
		return nref, nil
	}
	if reason, ok := rejectable(err); ok {
		a.reject(reason, ls, t, err)
		return 0, nil
	}
	a.fatal = fmt.Errorf("append to series %s: %w", ls, err)
	return 0, a.fatal
}

func (a *otlpAppender) reject(reason string, ls labels.Labels, t int64, err error) {
	a.h.rejected.WithLabelValues(reason).Inc()
	// target_info samples are made by the translator, not sent: they are
	// not data points of the request and are not counted as rejected ones.
	if ls.Get(model.MetricNameLabel) == "target_info" {
		return
	}
	a.bad.add("series %s at %d: %v", ls.String(), t, err)
}

// untranslatablePoints counts the data points of metrics Prometheus'
// translator drops: delta sums and histograms (no delta-to-cumulative
// conversion here) and metrics without a type.
func untranslatablePoints(md pmetric.Metrics) int {
	n := 0
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				m := ms.At(k)
				switch m.Type() {
				case pmetric.MetricTypeEmpty:
					n++
				case pmetric.MetricTypeSum:
					if m.Sum().AggregationTemporality() == pmetric.AggregationTemporalityDelta {
						n += m.Sum().DataPoints().Len()
					}
				case pmetric.MetricTypeHistogram:
					if m.Histogram().AggregationTemporality() == pmetric.AggregationTemporalityDelta {
						n += m.Histogram().DataPoints().Len()
					}
				case pmetric.MetricTypeExponentialHistogram:
					if m.ExponentialHistogram().AggregationTemporality() == pmetric.AggregationTemporalityDelta {
						n += m.ExponentialHistogram().DataPoints().Len()
					}
				}
			}
		}
	}
	return n
}
