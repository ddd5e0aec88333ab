package promcfg

import (
	"errors"
	"fmt"

	"github.com/prometheus/prometheus/config"
)

// Applier is a component that follows the configuration in force, as
// Prometheus' reloaders do (remote storage, rule manager, scrape manager).
type Applier struct {
	// Name says which component failed in a reload error.
	Name string
	// Apply makes the component use c. It must leave the component working
	// on its previous configuration when it fails.
	Apply func(c *config.Config) error
}

// AddApplier registers a component that Reload hands every newly loaded
// configuration to, in registration order. It does not apply the current
// configuration; the caller does that when it starts the component.
func (h *Holder) AddApplier(a Applier) {
	h.mu.Lock()
	h.appliers = append(h.appliers, a)
	h.mu.Unlock()
}

// apply hands c to every registered component; all are tried, and the
// errors of those that failed are returned together.
func (h *Holder) apply(c *config.Config) error {
	h.mu.RLock()
	as := append([]Applier(nil), h.appliers...)
	h.mu.RUnlock()
	var errs []error
	for _, a := range as {
		if err := a.Apply(c); err != nil {
			errs = append(errs, fmt.Errorf("apply config to %s: %w", a.Name, err))
		}
	}
	return errors.Join(errs...)
}
