package evidence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ErrNotServed is returned when the server has no evidence endpoint
// (404 or 405): an older tailroot. The agent keeps running and logs once.
var ErrNotServed = errors.New("server has no evidence endpoint")

// Client posts evidence batches as JSON.
type Client struct {
	URL     string
	HTTP    *http.Client      // nil means a client with Timeout
	Timeout time.Duration     // per attempt; zero means 10 s
	Headers map[string]string // added to every request
}

// Post sends one batch. Evidence is best effort: a 5xx or connection error
// is retried once after a second, then the batch is dropped with the
// error returned.
func (c *Client) Post(ctx context.Context, b Batch) error {
	if len(b.Evidence) == 0 {
		return nil
	}
	body, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encode evidence: %w", err)
	}
	for attempt := 0; ; attempt++ {
		err := c.post(ctx, body)
		var te *transientError
		if err == nil || !errors.As(err, &te) || attempt == 1 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

func (c *Client) post(ctx context.Context, body []byte) error {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("evidence request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tailroot-agent")
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return &transientError{fmt.Errorf("post evidence: %w", err)}
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
		return fmt.Errorf("post evidence to %s: %s: %w", c.URL, resp.Status, ErrNotServed)
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return &transientError{fmt.Errorf("post evidence: %s: %s", resp.Status, strings.TrimSpace(string(msg)))}
	}
	return fmt.Errorf("post evidence: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
}
