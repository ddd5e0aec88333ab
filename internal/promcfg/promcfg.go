// Package promcfg loads tailroot's --config.file, which is a Prometheus
// configuration file (global, rule_files, scrape_configs, alerting,
// remote_write, remote_read), with the prometheus module's own loader so
// that a Prometheus user's file means the same thing here.
//
// In: a path (or nothing). Out: a *config.Config, the YAML as reported by
// /api/v1/status/config, and a Holder that the server's components read the
// current configuration from. Holds: the Holder always has a valid config
// (config.DefaultConfig when no file is given); a failed reload keeps the
// previous one.
package promcfg

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/prometheus/config"

	// Service discovery mechanisms scrape_configs and alerting may use
	// (static_configs is built in). Registering them is what lets the
	// loader parse their sections; Kubernetes discovery is not built in
	// (client-go's dependency tree), so kubernetes_sd_configs is refused by
	// name.
	_ "github.com/prometheus/prometheus/discovery/dns"
	_ "github.com/prometheus/prometheus/discovery/file"
	_ "github.com/prometheus/prometheus/discovery/http"
)

// Load reads a Prometheus configuration file. An empty path gives
// Prometheus' defaults (no external labels, 1m evaluation interval).
func Load(path string, logger *slog.Logger) (*config.Config, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if path == "" {
		// An empty document, loaded and validated as a file would be, so
		// that every part of it (scrape configs included) can be read.
		c, err := config.Load("", logger)
		if err != nil {
			return nil, fmt.Errorf("load default config: %w", err)
		}
		return c, nil
	}
	c, err := config.LoadFile(path, false, logger)
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return c, nil
}

// Holder keeps the configuration in force. It is safe for concurrent use.
type Holder struct {
	mu       sync.RWMutex
	path     string
	cfg      *config.Config
	appliers []Applier
	validate func(*config.Config) error
}

// SetValidator makes Reload refuse, before any component sees it, a
// configuration v rejects (keys the server cannot honour); the
// configuration in force is kept.
func (h *Holder) SetValidator(v func(*config.Config) error) {
	h.mu.Lock()
	h.validate = v
	h.mu.Unlock()
}

// NewHolder returns a holder for the file at path (empty for defaults),
// already loaded.
func NewHolder(path string, logger *slog.Logger) (*Holder, error) {
	c, err := Load(path, logger)
	if err != nil {
		return nil, err
	}
	return &Holder{path: path, cfg: c}, nil
}

// Path is the configuration file's path; empty when none was given.
func (h *Holder) Path() string { return h.path }

// Get returns the configuration in force. Callers must not modify it.
func (h *Holder) Get() *config.Config {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.cfg
}

// Set replaces the configuration in force.
func (h *Holder) Set(c *config.Config) {
	h.mu.Lock()
	h.cfg = c
	h.mu.Unlock()
}

// Reload reads the file again and hands it to the registered appliers
// (AddApplier). A file that does not load keeps the configuration in force;
// a component that refuses it keeps its previous one and is named in the
// error, while the others and the Holder move on, as Prometheus' reload does.
func (h *Holder) Reload(logger *slog.Logger) (*config.Config, error) {
	c, err := Load(h.path, logger)
	if err != nil {
		return nil, err
	}
	h.mu.RLock()
	v := h.validate
	h.mu.RUnlock()
	if v != nil {
		if err := v(c); err != nil {
			return nil, fmt.Errorf("config %s: %w", h.path, err)
		}
	}
	h.Set(c)
	return c, h.apply(c)
}
