package main

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/prometheus/config"

	"github.com/tailroot/tailroot/internal/promcfg"
)

// reloader applies the configuration to the components that read it
// (remote_write forwarding, the query log, scraping, rules and alerting),
// as Prometheus' reload does: each component gets the configuration in
// force when it is added, and every reload (SIGHUP, POST /-/reload) loads
// the file, refuses it whole if it names keys tailroot cannot honour, and
// hands it to every component in the order they were added.
type reloader struct {
	mu     sync.Mutex
	holder *promcfg.Holder
	logger *slog.Logger
}

func newReloader(holder *promcfg.Holder, validate func(*config.Config) error, logger *slog.Logger) *reloader {
	holder.SetValidator(validate)
	return &reloader{holder: holder, logger: logger}
}

// add applies the configuration in force to a component and registers it
// for reloads.
func (r *reloader) add(name string, apply func(*config.Config) error) error {
	if err := apply(r.holder.Get()); err != nil {
		return fmt.Errorf("config %s: %s: %w", r.holder.Path(), name, err)
	}
	r.holder.AddApplier(promcfg.Applier{Name: name, Apply: apply})
	return nil
}

// reload reads the configuration file again and applies it.
func (r *reloader) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.holder.Reload(r.logger); err != nil {
		r.logger.Error("reload failed", "file", r.holder.Path(), "err", err)
		return err
	}
	r.logger.Info("configuration reloaded", "file", r.holder.Path())
	return nil
}
