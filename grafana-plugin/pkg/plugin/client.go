package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
)

// maxResponseBytes caps what the plugin reads from one server answer; a
// larger answer is an error rather than an out-of-memory plugin process.
const maxResponseBytes = 256 << 20

// APIError is a non-success answer of the tailroot server: an HTTP status
// other than 2xx, or a Prometheus error envelope.
type APIError struct {
	// Status is the HTTP status code; 0 when the request never got one.
	Status int
	// Type is the envelope's errorType (bad_data, execution, timeout, …),
	// empty when the body was not an envelope.
	Type    string
	Message string
	// Path is the API path that answered, for messages.
	Path string
}

func (e *APIError) Error() string {
	if e.Type != "" {
		return fmt.Sprintf("%s: %s (%s, HTTP %d)", e.Path, e.Message, e.Type, e.Status)
	}
	return fmt.Sprintf("%s: %s (HTTP %d)", e.Path, e.Message, e.Status)
}

// Source says whose fault the error is: anything the server answered, and
// any failure to reach it, is downstream of the plugin.
func (e *APIError) Source() backend.ErrorSource { return backend.ErrorSourceDownstream }

// errNotFound is wrapped by APIError-based errors whose status is 404.
var errNotFound = errors.New("not found")

// Is lets errors.Is(err, errNotFound) match a 404 answer.
func (e *APIError) Is(target error) bool {
	return target == errNotFound && e.Status == http.StatusNotFound
}

// envelope is the Prometheus HTTP API response body.
type envelope struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
	Infos     []string        `json:"infos"`
}

// client talks to one tailroot server. Its http.Client carries the
// datasource's basic auth, custom headers and timeouts (set up by the SDK's
// httpclient from the instance settings).
type client struct {
	base *url.URL
	http *http.Client
}

func newClient(rawURL string, hc *http.Client) (*client, error) {
	if strings.TrimSpace(rawURL) == "" {
		return nil, errors.New("datasource url is empty: set the tailroot server URL, e.g. http://localhost:9490")
	}
	u, err := url.Parse(strings.TrimRight(rawURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("datasource url %q: %w", rawURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("datasource url %q: scheme must be http or https", rawURL)
	}
	return &client{base: u, http: hc}, nil
}

// get fetches path with params and decodes the envelope. A non-2xx status or
// an error envelope returns *APIError.
func (c *client) get(ctx context.Context, path string, params url.Values) (*envelope, error) {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawQuery = params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, backend.PluginError(fmt.Errorf("build request %s: %w", path, err))
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &APIError{Path: path, Message: err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, &APIError{Status: resp.StatusCode, Path: path, Message: "read body: " + err.Error()}
	}
	if len(body) > maxResponseBytes {
		return nil, &APIError{Status: resp.StatusCode, Path: path, Message: fmt.Sprintf("response larger than %d bytes", maxResponseBytes)}
	}
	var env envelope
	jsonErr := json.Unmarshal(body, &env)
	if resp.StatusCode/100 != 2 {
		e := &APIError{Status: resp.StatusCode, Path: path, Message: strings.TrimSpace(string(body))}
		if jsonErr == nil && env.Error != "" {
			e.Type, e.Message = env.ErrorType, env.Error
		}
		if len(e.Message) > 512 {
			e.Message = e.Message[:512] + "…"
		}
		return nil, e
	}
	if jsonErr != nil {
		return nil, &APIError{Status: resp.StatusCode, Path: path, Message: "decode response: " + jsonErr.Error()}
	}
	if env.Status != "success" {
		return nil, &APIError{Status: resp.StatusCode, Path: path, Type: env.ErrorType, Message: fmt.Sprintf("status %q: %s", env.Status, env.Error)}
	}
	return &env, nil
}
