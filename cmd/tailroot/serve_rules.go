package main

import (
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/tailroot/tailroot/ruler"
)

// rulesFlags are the Prometheus flags of rule evaluation and alerting, with
// Prometheus' names and defaults.
type rulesFlags struct {
	opts            ruler.Options
	externalURL     string
	enableLifecycle bool
}

func (f *rulesFlags) register(fs *flag.FlagSet) {
	f.opts = ruler.DefaultOptions()
	fs.StringVar(&f.externalURL, "web.external-url", "", "URL under which tailroot is reached (alerts link to it); empty means http://<listen>/")
	fs.BoolVar(&f.enableLifecycle, "web.enable-lifecycle", false, "reload the configuration on POST/PUT /-/reload (SIGHUP always reloads)")
	fs.DurationVar(&f.opts.OutageTolerance, "rules.alert.for-outage-tolerance", f.opts.OutageTolerance, "longest outage after which the `for` state of alerts is restored")
	fs.DurationVar(&f.opts.ForGracePeriod, "rules.alert.for-grace-period", f.opts.ForGracePeriod, "least time between restart and a restored alert firing")
	fs.DurationVar(&f.opts.ResendDelay, "rules.alert.resend-delay", f.opts.ResendDelay, "least time between two sends of a firing alert to Alertmanager")
	fs.IntVar(&f.opts.NotificationQueueCapacity, "alertmanager.notification-queue-capacity", f.opts.NotificationQueueCapacity, "alerts waiting for Alertmanager")
}

// resolve fills the external URL from the listen address when not given.
func (f *rulesFlags) resolve(listen string) error {
	s := f.externalURL
	if s == "" {
		s = "http://" + listen + "/"
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("--web.external-url %q: %w", s, err)
	}
	if u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("--web.external-url %q: needs a scheme and host", s)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/"
	f.opts.ExternalURL = u
	return nil
}
