// Package scraper scrapes Prometheus and OpenMetrics endpoints (vLLM,
// SGLang, TGI and dcgm-exporter /metrics, tailroot's own) with the
// prometheus module's scrape manager and discovery manager, configured by
// the scrape_configs of --config.file exactly as Prometheus is.
//
// In: the configuration in force; targets from static, file, HTTP and DNS
// service discovery (Kubernetes discovery is not built in: it would pull
// client-go's dependency tree into the server). Out: samples, native
// histograms, exemplars and metadata appended to the store the pushed
// series go to, and the targets for /api/v1/targets.
//
// Holds: scraped series are stored as Prometheus would store them (job and
// instance labels, up, scrape_* series, staleness markers, honor_labels,
// relabelling, sample and label limits), and the metric metadata of each
// family is recorded in the metadata store, so /api/v1/metadata lists
// scraped families as it lists pushed ones.
package scraper

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/scrape"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/logging"
)

// MetadataSink records the metadata of a metric family.
type MetadataSink interface {
	Set(family string, m metadata.Metadata) error
}

// Options configures the scraper.
type Options struct {
	// SDMetrics are the service-discovery metrics shared with other
	// discovery managers of the process. Nil creates and registers them.
	SDMetrics *discovery.SDMetrics
	// Logger receives the managers' logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives prometheus_target_* and prometheus_sd_* metrics;
	// nil registers nothing.
	Registerer prometheus.Registerer
}

// Scraper runs the scrape and discovery managers.
type Scraper struct {
	scrape    *scrape.Manager
	discovery *discovery.Manager
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// New builds a scraper appending to store; Run starts it.
func New(store storage.AppendableV2, md MetadataSink, opts Options) (*Scraper, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	reg := opts.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	sdm := opts.SDMetrics
	if sdm == nil {
		var err error
		if sdm, err = discovery.CreateAndRegisterSDMetrics(reg); err != nil {
			return nil, fmt.Errorf("scraper: discovery metrics: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	dm := discovery.NewManager(ctx, opts.Logger.With("component", "discovery manager scrape"), reg, sdm, discovery.Name("scrape"))
	if dm == nil {
		cancel()
		return nil, fmt.Errorf("scraper: discovery manager could not register its metrics")
	}
	sm, err := scrape.NewManager(&scrape.Options{
		// The appender receives each family's metadata with its samples.
		AppendMetadata: true,
	}, opts.Logger.With("component", "scrape manager"), logging.NewJSONFileLogger, nil, &withMetadata{store: store, md: md, seen: map[string]metadata.Metadata{}}, reg)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("scraper: %w", err)
	}
	return &Scraper{scrape: sm, discovery: dm, cancel: cancel}, nil
}

// ApplyConfig applies scrape_configs (targets and their discovery).
func (s *Scraper) ApplyConfig(cfg *config.Config) error {
	if err := s.scrape.ApplyConfig(cfg); err != nil {
		return fmt.Errorf("scrape configs: %w", err)
	}
	scfgs, err := cfg.GetScrapeConfigs()
	if err != nil {
		return fmt.Errorf("scrape configs: %w", err)
	}
	c := make(map[string]discovery.Configs, len(scfgs))
	for _, v := range scfgs {
		c[v.JobName] = v.ServiceDiscoveryConfigs
	}
	if err := s.discovery.ApplyConfig(c); err != nil {
		return fmt.Errorf("scrape discovery: %w", err)
	}
	return nil
}

// Run starts discovery and scraping in the background.
func (s *Scraper) Run() {
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		_ = s.discovery.Run()
	}()
	go func() {
		defer s.wg.Done()
		_ = s.scrape.Run(s.discovery.SyncCh())
	}()
}

// Stop stops scraping (writing staleness markers, as Prometheus does) and
// discovery.
func (s *Scraper) Stop() {
	s.scrape.Stop()
	s.cancel()
	s.wg.Wait()
}

// Manager is the scrape manager, for the API's target and scrape-pool
// endpoints.
func (s *Scraper) Manager() *scrape.Manager { return s.scrape }

// withMetadata records each family's metadata as samples pass through to
// the store; metadata that did not change since the last scrape is not
// written again.
type withMetadata struct {
	store storage.AppendableV2
	md    MetadataSink

	mu   sync.Mutex
	seen map[string]metadata.Metadata
}

func (w *withMetadata) AppenderV2(ctx context.Context) storage.AppenderV2 {
	return &metadataAppender{AppenderV2: w.store.AppenderV2(ctx), w: w}
}

type metadataAppender struct {
	storage.AppenderV2
	w *withMetadata
}

func (a *metadataAppender) Append(ref storage.SeriesRef, ls labels.Labels, st, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, opts storage.AppendV2Options) (storage.SeriesRef, error) {
	if fam := opts.MetricFamilyName; fam != "" && !opts.Metadata.IsEmpty() && a.w.md != nil {
		a.w.mu.Lock()
		old, ok := a.w.seen[fam]
		if !ok || old != opts.Metadata {
			a.w.seen[fam] = opts.Metadata
			a.w.mu.Unlock()
			_ = a.w.md.Set(fam, opts.Metadata)
		} else {
			a.w.mu.Unlock()
		}
	}
	return a.AppenderV2.Append(ref, ls, st, t, v, h, fh, opts)
}
