package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
)

// FuzzAttributionParams sends arbitrary query strings to the attribution
// endpoints: every answer must be a JSON envelope with 200, 400 or 422,
// never a panic or a 5xx.
func FuzzAttributionParams(f *testing.F) {
	for _, s := range []string{
		"selector=%7Bmodel_name%3D%22m%22%7D&end=300&quantile=0.8",
		"quantile=1.5", "window=-1m", "start=10&end=5", "method=shapley&baseline_offset=1h&end=300",
		"view=tokens&start=0&end=300", "a=%7B%7D&b=%7B%7D&start=0&end=300&ci_method=delta",
		"selector=%7B", "end=NaN", "metric=ttft&start=0&end=300&method=euler",
		"local=true&partial_response=maybe&start=0&end=300", "partial_response=true&local=1&a=%7B%7D&b=%7B%7D&start=0&end=300",
	} {
		f.Add(s)
	}
	e := newAttributionEnv(f, nil)
	f.Fuzz(func(t *testing.T, q string) {
		vals, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		for _, path := range []string{"/api/v1/attribution/report", "/api/v1/attribution/breakdown", "/api/v1/attribution/ab"} {
			resp, err := http.Get(e.srv.URL + path + "?" + vals.Encode())
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 && resp.StatusCode != 400 && resp.StatusCode != 422 {
				t.Fatalf("%s?%s: status %d: %s", path, q, resp.StatusCode, body)
			}
			var env map[string]any
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatalf("%s?%s: body %q is not JSON", path, q, body)
			}
		}
	})
}
