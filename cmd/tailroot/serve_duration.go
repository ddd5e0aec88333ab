package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// promDuration is a duration flag in Prometheus' syntax (30d, 1w, 1h30m,
// 500ms), printed the way Prometheus prints it ("2h", "15d") so that
// /api/v1/status/flags reads as a Prometheus server's does: a Thanos sidecar
// parses storage.tsdb.min-block-duration and max-block-duration from there
// with model.ParseDuration. Go's own syntax (1.5h, 90m0s) is still
// accepted, so existing command lines keep working.
type promDuration struct{ v *time.Duration }

func (d promDuration) String() string {
	if d.v == nil {
		return "0s"
	}
	return model.Duration(*d.v).String()
}

func (d promDuration) Set(s string) error {
	v, err := parsePromDuration(s)
	if err != nil {
		return err
	}
	*d.v = v
	return nil
}

// Get implements flag.Getter.
func (d promDuration) Get() any { return *d.v }

func parsePromDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if v, err := model.ParseDuration(s); err == nil {
		return time.Duration(v), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want Prometheus syntax such as 30d, 1w, 1h30m or 500ms", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	if v%time.Millisecond != 0 {
		// Prometheus' syntax stops at milliseconds; a finer value would be
		// reported rounded at /api/v1/status/flags.
		return 0, fmt.Errorf("duration %q is finer than a millisecond", s)
	}
	return v, nil
}

// promDurationFlags turns every time.Duration flag of fs into one that
// parses Prometheus' syntax and prints its default and value as Prometheus
// does; the flag keeps writing the variable it was defined with. Call it
// after the flags are defined and before Parse.
func promDurationFlags(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		if _, ok := g.Get().(time.Duration); !ok {
			return
		}
		if _, ok := f.Value.(promDuration); ok {
			return
		}
		f.Value = forwardDuration{g}
		f.DefValue = f.Value.String()
	})
}

// forwardDuration wraps the standard library's duration flag value: it
// parses Prometheus' syntax and hands the result on in Go's syntax.
type forwardDuration struct{ inner flag.Getter }

func (f forwardDuration) String() string {
	if f.inner == nil { // the zero value flag.PrintDefaults makes
		return "0s"
	}
	d, _ := f.inner.Get().(time.Duration)
	return model.Duration(d).String()
}

func (f forwardDuration) Set(s string) error {
	v, err := parsePromDuration(s)
	if err != nil {
		return err
	}
	return f.inner.Set(v.String())
}

// Get implements flag.Getter.
func (f forwardDuration) Get() any { return f.inner.Get() }
