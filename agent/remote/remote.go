// Package remote sends the agent's queued remote-write 2.0 requests to
// tailroot and decides, from each answer, whether a request is done or
// must be sent again.
//
// In: records from a queue.Queue (snappy remote-write 2.0 bodies). Out:
// HTTP POSTs to the server's /api/v1/write; the queue's cursor moves past
// a record once the server has answered for it:
//
//	2xx                      delivered
//	400, 413, 415, other 4xx the data is bad and will never be accepted:
//	                         dropped with a log line (tailroot's 400 keeps
//	                         the good series of a partly bad request)
//	408, 429, 5xx            retried after Retry-After, else backoff
//	connection error         retried with backoff
//
// Backoff is exponential from MinBackoff to MaxBackoff with equal jitter
// (half fixed, half random), so agents that lost the same server do not
// come back in step. Records are sent one at a time in queue order: the
// TSDB rejects samples older than the newest of their series, so order
// matters more than parallelism.
package remote

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tailroot/tailroot/agent/rw"
)

// Outcome is what to do with a request after one attempt.
type Outcome int

// The outcomes.
const (
	// Delivered: the server stored the request.
	Delivered Outcome = iota
	// Rejected: the server refused the data for good; drop it.
	Rejected
	// Retry: a transient failure; send it again later.
	Retry
)

func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Rejected:
		return "rejected"
	case Retry:
		return "retry"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Result is the answer to one attempt.
type Result struct {
	Outcome Outcome
	Status  int           // HTTP status; 0 when no response came
	Err     error         // transport error or the server's message for non-2xx
	After   time.Duration // Retry-After, 0 when absent
	// Written counts from the remote write 2.0 response headers; -1 when
	// the header is absent.
	Samples, Histograms, Exemplars int
}

// Options configure a Client. Zero values take the defaults noted.
type Options struct {
	// URL is the remote-write endpoint, e.g. http://tailroot:9490/api/v1/write.
	URL string
	// Timeout bounds one attempt. Zero means 30 s.
	Timeout time.Duration
	// Headers are added to every request (auth tokens, tenant ids).
	Headers map[string]string
	// Username and Password, when Username is set, are sent as basic auth.
	Username, Password string
	// UserAgent is sent as User-Agent. Empty means "tailroot-agent".
	UserAgent string
	// HTTP is the client to use; nil means a new http.Client.
	HTTP *http.Client
}

// Client posts remote-write 2.0 bodies.
type Client struct {
	opts Options
	http *http.Client
}

// NewClient returns a client for opts.URL.
func NewClient(opts Options) (*Client, error) {
	if opts.URL == "" {
		return nil, fmt.Errorf("remote: url is empty")
	}
	if !strings.HasPrefix(opts.URL, "http://") && !strings.HasPrefix(opts.URL, "https://") {
		return nil, fmt.Errorf("remote: url %q: want http:// or https://", opts.URL)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "tailroot-agent"
	}
	c := &Client{opts: opts, http: opts.HTTP}
	if c.http == nil {
		c.http = &http.Client{}
	}
	return c, nil
}

// Write sends one body and classifies the answer.
func (c *Client) Write(ctx context.Context, body []byte) Result {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.URL, bytes.NewReader(body))
	if err != nil {
		return Result{Outcome: Rejected, Err: fmt.Errorf("build request: %w", err)}
	}
	h := req.Header
	h.Set("Content-Type", rw.ContentType)
	h.Set("Content-Encoding", "snappy")
	h.Set("X-Prometheus-Remote-Write-Version", rw.Version)
	h.Set("User-Agent", c.opts.UserAgent)
	for k, v := range c.opts.Headers {
		h.Set(k, v)
	}
	if c.opts.Username != "" {
		req.SetBasicAuth(c.opts.Username, c.opts.Password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Result{Outcome: Retry, Err: err, Samples: -1, Histograms: -1, Exemplars: -1}
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	_, _ = io.Copy(io.Discard, resp.Body)
	r := Result{
		Status:     resp.StatusCode,
		Outcome:    Classify(resp.StatusCode),
		After:      RetryAfter(resp.Header.Get("Retry-After"), time.Now()),
		Samples:    headerInt(resp.Header, "X-Prometheus-Remote-Write-Samples-Written"),
		Histograms: headerInt(resp.Header, "X-Prometheus-Remote-Write-Histograms-Written"),
		Exemplars:  headerInt(resp.Header, "X-Prometheus-Remote-Write-Exemplars-Written"),
	}
	if r.Outcome != Delivered {
		r.Err = fmt.Errorf("server answered %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return r
}

// Classify maps an HTTP status to an outcome (see the package comment).
func Classify(status int) Outcome {
	switch {
	case status >= 200 && status < 300:
		return Delivered
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests:
		return Retry
	case status >= 400 && status < 500:
		return Rejected
	}
	// 5xx, and 1xx/3xx which a remote-write server has no business sending:
	// retrying is the safe side.
	return Retry
}

// RetryAfter parses a Retry-After header: delay seconds or an HTTP date.
// It returns 0 when the header is absent, malformed or in the past.
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		if s > 1<<31 {
			s = 1 << 31
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func headerInt(h http.Header, k string) int {
	v := h.Get(k)
	if v == "" {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return n
}

// Backoff is an exponential backoff with equal jitter.
type Backoff struct {
	Min, Max time.Duration
	// Rand returns a value in [0, 1); nil uses math/rand/v2.
	Rand func() float64
}

// Delay returns the wait before attempt n (n = 1 after the first failure):
// d = min(Max, Min·2^(n-1)), then d/2 + rand·d/2.
func (b Backoff) Delay(n int) time.Duration {
	d := b.Min
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	r := rand.Float64
	if b.Rand != nil {
		r = b.Rand
	}
	half := d / 2
	return half + time.Duration(r()*float64(d-half))
}
