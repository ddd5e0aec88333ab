// Package scrape collects Prometheus text and OpenMetrics endpoints
// (vLLM, SGLang, Triton, TGI, dcgm-exporter) the way a Prometheus server
// would, so the series arrive in tailroot as if Prometheus had scraped them.
//
// In: HTTP responses in the Prometheus text format 0.0.4 or OpenMetrics
// 1.0, parsed with Prometheus' own model/textparse. Out: collect.Series,
// one float sample per exposed sample: classic histograms and summaries stay
// as their _bucket/_sum/_count series. Like Prometheus it adds job and
// instance (renaming clashing exposed labels to exported_job /
// exported_instance unless honor_labels), reports up, scrape_duration_seconds
// and scrape_samples_scraped, honours exposed timestamps, and writes a
// staleness marker for every series that disappears or when the target goes
// down, so PromQL stops showing it after the scrape instead of five minutes
// later.
package scrape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/model/value"

	"github.com/tailroot/tailroot/agent/collect"
)

// acceptHeader asks for OpenMetrics first, as Prometheus does.
const acceptHeader = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"

// Options describe one target. Zero values take the defaults noted.
type Options struct {
	Job string // required
	URL string // required, http(s)
	// Timeout bounds one scrape. Zero means 10 s.
	Timeout time.Duration
	// Labels are added to every series (after job and instance).
	Labels map[string]string
	// HonorLabels keeps exposed labels that clash with target labels.
	HonorLabels bool
	// BodyLimit bounds the response size. Zero means 64 MiB.
	BodyLimit int64
	// HTTP is the client; nil means a new one.
	HTTP *http.Client
}

// Scraper scrapes one target. It implements collect.Collector.
type Scraper struct {
	opts     Options
	http     *http.Client
	target   labels.Labels
	instance string
	name     string
	prev     map[uint64]labels.Labels // series of the last successful scrape
	st       *labels.SymbolTable
}

// New returns a scraper for one target.
func New(opts Options) (*Scraper, error) {
	if opts.Job == "" {
		return nil, errors.New("scrape: job is empty")
	}
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("scrape: target url %q: want http(s)://host:port/path", opts.URL)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.BodyLimit <= 0 {
		opts.BodyLimit = 64 << 20
	}
	s := &Scraper{opts: opts, http: opts.HTTP, instance: u.Host, st: labels.NewSymbolTable()}
	if s.http == nil {
		s.http = &http.Client{}
	}
	b := labels.NewBuilder(labels.EmptyLabels())
	b.Set(model.JobLabel, opts.Job)
	b.Set(model.InstanceLabel, u.Host)
	for k, v := range opts.Labels {
		b.Set(k, v)
	}
	s.target = b.Labels()
	s.name = "scrape/" + opts.Job + "/" + u.Host
	return s, nil
}

// Name identifies the target in logs and metrics.
func (s *Scraper) Name() string { return s.name }

// Collect scrapes the target once. A failed scrape returns up = 0, the
// staleness markers and the error.
func (s *Scraper) Collect(ctx context.Context, now time.Time, dst []collect.Series) ([]collect.Series, error) {
	t := collect.Millis(now)
	start := time.Now()
	body, ct, err := s.fetch(ctx)
	var series []collect.Series
	if err == nil {
		series, err = Parse(body, ct, t, s.target, s.opts.HonorLabels, s.st, nil)
	}
	dur := time.Since(start).Seconds()
	cur := make(map[uint64]labels.Labels, len(series))
	if err == nil {
		for _, x := range series {
			h := x.Labels.Hash()
			if _, dup := cur[h]; dup {
				continue // Prometheus keeps the first of duplicate series too
			}
			cur[h] = x.Labels
			dst = append(dst, x)
		}
	}
	// Staleness: series of the last scrape that are gone now.
	stale := math.Float64frombits(value.StaleNaN)
	for h, ls := range s.prev {
		if _, ok := cur[h]; !ok {
			dst = append(dst, collect.Series{Labels: ls, Samples: []collect.Sample{{T: t, V: stale}}})
		}
	}
	s.prev = cur
	up := 1.0
	if err != nil {
		up = 0
	}
	dst = append(dst,
		s.synthetic("up", "1 if the target was scraped successfully.", t, up),
		s.synthetic("scrape_duration_seconds", "Duration of the scrape.", t, dur),
		s.synthetic("scrape_samples_scraped", "Samples the target exposed.", t, float64(len(cur))),
	)
	if err != nil {
		return dst, fmt.Errorf("scrape %s: %w", s.opts.URL, err)
	}
	return dst, nil
}

func (s *Scraper) synthetic(name, help string, t int64, v float64) collect.Series {
	b := labels.NewBuilder(s.target)
	b.Set(model.MetricNameLabel, name)
	return collect.Series{
		Labels:  b.Labels(),
		Meta:    metadata.Metadata{Type: model.MetricTypeGauge, Help: help},
		Samples: []collect.Sample{{T: t, V: v}},
	}
}

func (s *Scraper) fetch(ctx context.Context) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.opts.URL, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Accept", acceptHeader)
	req.Header.Set("User-Agent", "tailroot-agent")
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", fmt.Sprintf("%g", s.opts.Timeout.Seconds()))
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, "", fmt.Errorf("server returned HTTP status %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, s.opts.BodyLimit+1))
	if err != nil {
		return nil, "", fmt.Errorf("read body: %w", err)
	}
	if int64(len(b)) > s.opts.BodyLimit {
		return nil, "", fmt.Errorf("body over the limit of %d bytes", s.opts.BodyLimit)
	}
	return b, resp.Header.Get("Content-Type"), nil
}

// Parse parses an exposition body. Every sample gets defaultT unless it
// carries its own timestamp, and the target labels are merged in (see the
// package comment). st may be nil. The whole body must parse: like
// Prometheus, a scrape with a syntax error yields nothing.
func Parse(body []byte, contentType string, defaultT int64, target labels.Labels, honor bool, st *labels.SymbolTable, dst []collect.Series) ([]collect.Series, error) {
	p, err := textparse.New(body, contentType, st, textparse.ParserOptions{FallbackContentType: "text/plain"})
	if p == nil {
		return dst, fmt.Errorf("content type %q: %w", contentType, err)
	}
	meta := map[string]metadata.Metadata{}
	var ls labels.Labels
	b := labels.NewBuilder(labels.EmptyLabels())
	start := len(dst)
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return dst[:start], fmt.Errorf("parse: %w", err)
		}
		switch e {
		case textparse.EntryType:
			name, typ := p.Type()
			m := meta[string(name)]
			m.Type = typ
			meta[string(name)] = m
		case textparse.EntryHelp:
			name, help := p.Help()
			m := meta[string(name)]
			m.Help = string(help)
			meta[string(name)] = m
		case textparse.EntryUnit:
			name, unit := p.Unit()
			m := meta[string(name)]
			m.Unit = string(unit)
			meta[string(name)] = m
		case textparse.EntrySeries:
			_, ts, v := p.Series()
			p.Labels(&ls)
			t := defaultT
			if ts != nil {
				t = *ts
			}
			x := collect.Series{Labels: merge(b, ls, target, honor), Samples: []collect.Sample{{T: t, V: v}}}
			x.Meta = lookupMeta(meta, ls.Get(model.MetricNameLabel))
			dst = append(dst, x)
		case textparse.EntryHistogram:
			_, ts, h, _ := p.Histogram()
			if h == nil {
				continue // float histograms come only from protobuf, which is not requested
			}
			p.Labels(&ls)
			t := defaultT
			if ts != nil {
				t = *ts
			}
			x := collect.Series{Labels: merge(b, ls, target, honor), Histograms: []collect.HistogramSample{{T: t, H: h.Copy()}}}
			x.Meta = lookupMeta(meta, ls.Get(model.MetricNameLabel))
			dst = append(dst, x)
		}
	}
	return dst, nil
}

// merge adds the target labels to an exposed label set.
func merge(b *labels.Builder, exposed, target labels.Labels, honor bool) labels.Labels {
	b.Reset(exposed)
	target.Range(func(l labels.Label) {
		if v := exposed.Get(l.Name); v != "" {
			if honor {
				return
			}
			b.Set(model.ExportedLabelPrefix+l.Name, v)
		}
		b.Set(l.Name, l.Value)
	})
	return b.Labels()
}

// familySuffixes are the series-name suffixes of a metric family, tried
// when a series name is not itself a family name.
var familySuffixes = []string{"_bucket", "_count", "_sum", "_total", "_created", "_info", "_gcount", "_gsum"}

func lookupMeta(meta map[string]metadata.Metadata, name string) metadata.Metadata {
	if m, ok := meta[name]; ok {
		return m
	}
	for _, suf := range familySuffixes {
		if base, ok := strings.CutSuffix(name, suf); ok {
			if m, ok := meta[base]; ok {
				return m
			}
		}
	}
	return metadata.Metadata{Type: model.MetricTypeUnknown}
}
