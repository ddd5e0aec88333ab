// Package ruler evaluates Prometheus recording and alerting rules with
// tailroot's engine and sends alerts to Alertmanager, by embedding the
// prometheus module's rules manager, notifier and discovery manager — the
// parts cmd/prometheus wires together, wired the same way.
//
// In: the configuration in force (rule_files, global.evaluation_interval,
// external labels, alerting.alertmanagers), the engine (so tailroot
// functions such as tail_mean work in rules), and the store rules read
// from and write their series (recording rules, ALERTS, ALERTS_FOR_STATE)
// to. Out: rule groups and alerts for /api/v1/rules and /api/v1/alerts,
// Alertmanagers for /api/v1/alertmanagers, alerts posted to Alertmanager.
//
// Holds: a configuration is applied whole or not at all — a rule file that
// does not parse fails ApplyConfig and the previous rules keep running; the
// `for` state of alerts is restored from ALERTS_FOR_STATE after a restart,
// as Prometheus does.
package ruler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/notifier"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
)

// Options configures the ruler. Zero values mean Prometheus' defaults.
type Options struct {
	// ExternalURL is where users reach tailroot; alerts carry it as their
	// generator URL. Nil means http://localhost/.
	ExternalURL *url.URL
	// OutageTolerance is the longest outage after which the `for` state
	// of alerts is still restored. Zero means 1h.
	OutageTolerance time.Duration
	// ForGracePeriod is the least time an alert with a restored `for`
	// state waits before firing. Zero means 10m.
	ForGracePeriod time.Duration
	// ResendDelay is the least time between two sends of a firing alert.
	// Zero means 1m.
	ResendDelay time.Duration
	// NotificationQueueCapacity is how many alerts wait for Alertmanager.
	// Zero means 10000.
	NotificationQueueCapacity int
	// SDMetrics are the service-discovery metrics shared with the other
	// discovery managers of the process; nil creates and registers them.
	SDMetrics *discovery.SDMetrics
	// Logger receives the components' logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the prometheus_rule_* and
	// prometheus_notifications_* metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

// DefaultOptions returns Prometheus' defaults.
func DefaultOptions() Options {
	return Options{
		OutageTolerance:           time.Hour,
		ForGracePeriod:            10 * time.Minute,
		ResendDelay:               time.Minute,
		NotificationQueueCapacity: 10000,
	}
}

// Ruler runs rules and sends their alerts.
type Ruler struct {
	opts      Options
	rules     *rules.Manager
	notifier  *notifier.Manager
	discovery *discovery.Manager
	parser    parser.Parser
	cancel    context.CancelFunc

	mu      sync.Mutex
	applied bool
	wg      sync.WaitGroup
}

// Local is the server's own store: rules write their series to it, and the
// `for` state of alerts is restored from it.
type Local interface {
	storage.Queryable
	storage.AppendableV2
}

// New builds a ruler whose rules query q (the local TSDB, or the global
// view over remote stores, as Prometheus' rules query its fanout storage)
// and write to local; Run starts it once the first ApplyConfig succeeded.
func New(engine promql.QueryEngine, p parser.Parser, q storage.Queryable, local Local, opts Options) (*Ruler, error) {
	def := DefaultOptions()
	if opts.OutageTolerance <= 0 {
		opts.OutageTolerance = def.OutageTolerance
	}
	if opts.ForGracePeriod <= 0 {
		opts.ForGracePeriod = def.ForGracePeriod
	}
	if opts.ResendDelay <= 0 {
		opts.ResendDelay = def.ResendDelay
	}
	if opts.NotificationQueueCapacity <= 0 {
		opts.NotificationQueueCapacity = def.NotificationQueueCapacity
	}
	if opts.ExternalURL == nil {
		opts.ExternalURL = &url.URL{Scheme: "http", Host: "localhost", Path: "/"}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	reg := opts.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	ctx, cancel := context.WithCancel(context.Background())
	sdMetrics := opts.SDMetrics
	if sdMetrics == nil {
		var err error
		if sdMetrics, err = discovery.CreateAndRegisterSDMetrics(reg); err != nil {
			cancel()
			return nil, fmt.Errorf("ruler: discovery metrics: %w", err)
		}
	}
	dm := discovery.NewManager(ctx, opts.Logger.With("component", "discovery manager notify"), reg, sdMetrics, discovery.Name("notify"))
	if dm == nil {
		cancel()
		return nil, errors.New("ruler: discovery manager could not register its metrics")
	}
	nm := notifier.NewManager(&notifier.Options{
		QueueCapacity:   opts.NotificationQueueCapacity,
		DrainOnShutdown: true,
		Registerer:      reg,
	}, config.DefaultGlobalConfig.MetricNameValidationScheme, opts.Logger.With("component", "notifier"))
	rm := rules.NewManager(&rules.ManagerOptions{
		AppendableV2:    local,
		Queryable:       local,
		QueryFunc:       rules.EngineQueryFunc(engine, q),
		NotifyFunc:      rules.SendAlerts(nm, opts.ExternalURL.String()),
		Context:         ctx,
		ExternalURL:     opts.ExternalURL,
		Registerer:      reg,
		Logger:          opts.Logger.With("component", "rule manager"),
		OutageTolerance: opts.OutageTolerance,
		ForGracePeriod:  opts.ForGracePeriod,
		ResendDelay:     opts.ResendDelay,
		Parser:          p,
	})
	return &Ruler{opts: opts, rules: rm, notifier: nm, discovery: dm, parser: p, cancel: cancel}, nil
}

// ApplyConfig loads the rule files and Alertmanagers of cfg. Rule files are
// parsed (with tailroot's parser, so tailroot functions are allowed) before
// anything changes; on error the rules in force keep running.
func (r *Ruler) ApplyConfig(cfg *config.Config) error {
	files, err := ruleFiles(cfg)
	if err != nil {
		return err
	}
	if err := rules.ParseFiles(files, cfg.GlobalConfig.MetricNameValidationScheme, r.parser, r.opts.Logger); err != nil {
		return fmt.Errorf("rule files: %w", err)
	}
	if err := r.notifier.ApplyConfig(cfg); err != nil {
		return fmt.Errorf("alerting: %w", err)
	}
	sd := make(map[string]discovery.Configs)
	for k, v := range cfg.AlertingConfig.AlertmanagerConfigs.ToMap() {
		sd[k] = v.ServiceDiscoveryConfigs
	}
	if err := r.discovery.ApplyConfig(sd); err != nil {
		return fmt.Errorf("alertmanager discovery: %w", err)
	}
	if err := r.rules.Update(time.Duration(cfg.GlobalConfig.EvaluationInterval), files, cfg.GlobalConfig.ExternalLabels, r.opts.ExternalURL.String(), nil); err != nil {
		return fmt.Errorf("rules: %w", err)
	}
	r.mu.Lock()
	r.applied = true
	r.mu.Unlock()
	return nil
}

// ruleFiles expands the rule_files globs, as Prometheus does.
func ruleFiles(cfg *config.Config) ([]string, error) {
	var files []string
	for _, pat := range cfg.RuleFiles {
		m, err := filepath.Glob(pat)
		if err != nil {
			return nil, fmt.Errorf("rule_files %q: %w", pat, err)
		}
		files = append(files, m...)
	}
	return files, nil
}

// Run starts evaluating rules and sending alerts in the background.
func (r *Ruler) Run() {
	r.wg.Add(3)
	go func() {
		defer r.wg.Done()
		_ = r.discovery.Run()
	}()
	go func() {
		defer r.wg.Done()
		r.notifier.Run(r.discovery.SyncCh())
	}()
	go func() {
		defer r.wg.Done()
		r.rules.Run()
	}()
}

// Stop stops rule evaluation, then drains the alert queue. The rules
// manager stops first: the notifier must outlive the last send.
func (r *Ruler) Stop() {
	r.rules.Stop()
	r.notifier.Stop()
	r.cancel()
	r.wg.Wait()
}

// RuleGroups and AlertingRules serve /api/v1/rules and /api/v1/alerts.
func (r *Ruler) RuleGroups() []*rules.Group { return r.rules.RuleGroups() }

// AlertingRules lists the alerting rules of every group.
func (r *Ruler) AlertingRules() []*rules.AlertingRule { return r.rules.AlertingRules() }

// Alertmanagers and DroppedAlertmanagers serve /api/v1/alertmanagers.
func (r *Ruler) Alertmanagers() []*url.URL { return r.notifier.Alertmanagers() }

// DroppedAlertmanagers lists Alertmanagers dropped by relabelling.
func (r *Ruler) DroppedAlertmanagers() []*url.URL { return r.notifier.DroppedAlertmanagers() }
