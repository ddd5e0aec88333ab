package main

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/prometheus/config"

	"github.com/tailroot/tailroot/internal/promcfg"
)

// reloader applies a new configuration to the components that read it
// (rules, alerting, and whatever else registers), as Prometheus' reload
// does: the file is loaded first, then every component gets it in order; a
// file that does not load changes nothing.
type reloader struct {
	mu     sync.Mutex
	holder *promcfg.Holder
	logger *slog.Logger
	// validate, when set, refuses a configuration before any component
	// sees it.
	validate func(*config.Config) error
	steps    []reloadStep
}

type reloadStep struct {
	name  string
	apply func(*config.Config) error
}

// add registers a component; it is applied on every reload, in the order
// added.
func (r *reloader) add(name string, apply func(*config.Config) error) {
	r.steps = append(r.steps, reloadStep{name, apply})
}

// apply gives cfg to every component. All are tried; the errors are joined.
func (r *reloader) apply(cfg *config.Config) error {
	if r.validate != nil {
		if err := r.validate(cfg); err != nil {
			return err
		}
	}
	var errs []error
	for _, s := range r.steps {
		if err := s.apply(cfg); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	return errors.Join(errs...)
}

// reload reads the configuration file again and applies it (SIGHUP and
// POST /-/reload).
func (r *reloader) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg, err := promcfg.Load(r.holder.Path(), r.logger)
	if err != nil {
		r.logger.Error("reload: configuration not loaded; the previous one stays in force", "file", r.holder.Path(), "err", err)
		return err
	}
	if err := r.apply(cfg); err != nil {
		r.logger.Error("reload: configuration applied with errors", "file", r.holder.Path(), "err", err)
		return err
	}
	r.holder.Set(cfg)
	r.logger.Info("configuration reloaded", "file", r.holder.Path())
	return nil
}
