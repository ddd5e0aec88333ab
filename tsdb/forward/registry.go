package forward

import (
	"errors"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// capture is the Registerer handed to the remote storage: it passes every
// collector on to the caller's registerer (if any) and keeps them, so the
// forwarder can read the queues' own counters when it drains on Close.
type capture struct {
	next prometheus.Registerer

	mu sync.Mutex
	cs []prometheus.Collector
}

func (r *capture) Register(c prometheus.Collector) error {
	if r.next != nil {
		if err := r.next.Register(c); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.cs = append(r.cs, c)
	r.mu.Unlock()
	return nil
}

func (r *capture) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *capture) Unregister(c prometheus.Collector) bool {
	r.mu.Lock()
	for i, x := range r.cs {
		if x == c {
			r.cs = append(r.cs[:i], r.cs[i+1:]...)
			break
		}
	}
	r.mu.Unlock()
	if r.next != nil {
		return r.next.Unregister(c)
	}
	return true
}

// sum adds up every series of the named counter or gauge.
func (r *capture) sum(name string) (float64, error) {
	r.mu.Lock()
	cs := append([]prometheus.Collector(nil), r.cs...)
	r.mu.Unlock()
	ch := make(chan prometheus.Metric, 64)
	go func() {
		for _, c := range cs {
			c.Collect(ch)
		}
		close(ch)
	}()
	// Desc has no accessor for its name; its String() spells it out.
	want := `fqName: "` + name + `"`
	var total float64
	var errs []error
	for m := range ch {
		if !strings.Contains(m.Desc().String(), want) {
			continue
		}
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			errs = append(errs, err)
			continue
		}
		switch {
		case d.Counter != nil:
			total += d.Counter.GetValue()
		case d.Gauge != nil:
			total += d.Gauge.GetValue()
		}
	}
	return total, errors.Join(errs...)
}
