package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/grafana/regexp"
	"golang.org/x/net/netutil"

	"github.com/tailroot/tailroot/internal/inflight"
)

// serveLimits are the limits on connections and write requests that sit in
// front of every handler: what one client can hold of the server.
type serveLimits struct {
	inflight          inflight.Options
	readTimeout       time.Duration
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
	maxConnections    int
	corsOrigin        string
	cors              *regexp.Regexp
}

// limitFlags registers the limit flags; Prometheus' names and defaults
// where Prometheus has the flag (web.read-timeout, web.max-connections,
// web.cors.origin, whose default here is "none" rather than ".*").
func (c *serveConfig) limitFlags(fs *flag.FlagSet) {
	l := &c.limits
	l.inflight = inflight.DefaultOptions()
	fs.IntVar(&l.inflight.MaxConcurrent, "ingest.max-concurrent", l.inflight.MaxConcurrent, "write requests (remote write, OTLP, request records, evidence) decoded and appended at once; more wait up to --ingest.max-inflight-wait, then get 503; 0 means no limit")
	fs.DurationVar(&l.inflight.MaxWait, "ingest.max-inflight-wait", l.inflight.MaxWait, "how long a write request waits for a slot under --ingest.max-concurrent")
	fs.Var(bytesFlag{&l.inflight.MaxBytes}, "ingest.max-inflight-bytes", "body bytes, compressed and decoded, that all write requests in flight may hold together, counted before they are allocated (503 above, 413 for one request that alone is above); 0 means no limit")
	fs.DurationVar(&l.readTimeout, "web.read-timeout", 5*time.Minute, "maximum duration before timing out read of the request, body included (a client that stalls its body is cut off)")
	fs.DurationVar(&l.readHeaderTimeout, "web.read-header-timeout", 30*time.Second, "maximum duration to read a request's headers")
	fs.DurationVar(&l.idleTimeout, "web.idle-timeout", 5*time.Minute, "how long an idle keep-alive connection stays open")
	fs.IntVar(&l.maxConnections, "web.max-connections", 512, "maximum number of simultaneous connections; 0 means no limit")
	fs.IntVar(&c.ingest.MaxLabelNameLength, "ingest.max-label-name-length", c.ingest.MaxLabelNameLength, "series and request records with a longer label name are rejected (every ingest path); 0 means no limit")
	fs.IntVar(&c.ingest.MaxLabelValueLength, "ingest.max-label-value-length", c.ingest.MaxLabelValueLength, "series and request records with a longer label value are rejected (every ingest path); 0 means no limit")
	fs.IntVar(&c.query.Limits.MaxLength, "query.max-length", c.query.Limits.MaxLength, "longest query accepted, in bytes (400 above); 0 means no limit")
	fs.IntVar(&c.query.Limits.MaxSize, "query.max-size", c.query.Limits.MaxSize, "most tokens a query may have, counted before parsing and after MetricsQL WITH templates are expanded (400 above); 0 means no limit")
	fs.IntVar(&c.query.Limits.MaxDepth, "query.max-depth", c.query.Limits.MaxDepth, "deepest nesting of a query: brackets, its syntax tree (a+b+c… is as deep as long), WITH templates in templates (400 above); 0 means no limit")
	fs.StringVar(&l.corsOrigin, "web.cors.origin", "", "regexp of browser origins allowed to read the API (CORS), fully anchored, e.g. 'https?://(domain1|domain2)\\.com'; empty allows none")
}

// checkLimits compiles what the limit flags need once parsed, and gives
// every ingest path the label rules of remote write.
func (c *serveConfig) checkLimits() error {
	rules := c.ingest.Rules()
	c.otlp.Rules = rules
	c.records.Limits.MaxLabels = rules.MaxLabels
	c.records.Limits.MaxLabelNameLength = rules.MaxLabelNameLength
	c.records.Limits.MaxLabelValueLength = rules.MaxLabelValueLength
	if c.limits.corsOrigin != "" {
		re, err := regexp.Compile("^(?:" + c.limits.corsOrigin + ")$")
		if err != nil {
			return fmt.Errorf("--web.cors.origin %q: %w", c.limits.corsOrigin, err)
		}
		c.limits.cors = re
	}
	return nil
}

// ingestPaths are the write endpoints the in-flight limiter bounds.
var ingestPaths = map[string]bool{
	"/api/v1/write":           true,
	"/api/v1/otlp/v1/metrics": true,
	"/v1/metrics":             true,
	"/api/v1/otlp/v1/traces":  true,
	"/v1/traces":              true,
	"/api/v1/requests":        true,
	"/api/v1/evidence":        true,
}

// limitServer puts the limits in front of h and onto srv and ln: the
// in-flight limiter before the write endpoints, the timeouts on the
// server, the connection cap on the listener.
func (l *serveLimits) limitServer(srv *http.Server, h http.Handler, ln net.Listener) net.Listener {
	lim := inflight.New(l.inflight)
	limited := lim.Handler(h)
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && ingestPaths[r.URL.Path] {
			limited.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
	srv.ReadTimeout = l.readTimeout
	srv.ReadHeaderTimeout = l.readHeaderTimeout
	srv.IdleTimeout = l.idleTimeout
	if l.maxConnections > 0 {
		ln = netutil.LimitListener(ln, l.maxConnections)
	}
	return ln
}
