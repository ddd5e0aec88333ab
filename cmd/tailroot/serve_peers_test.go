package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tailroot/tailroot/query/tailfn"
)

// TestPeerFlags parses --records.peer repeated and comma-separated, and
// refuses bad URLs and an http config without peers, naming the flag.
func TestPeerFlags(t *testing.T) {
	c, _, err := parseServeFlags([]string{"--records.peer=http://a:9490, http://b:9490", "--records.peer", "https://c/prefix/"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.peers.urls, " "); got != "http://a:9490 http://b:9490 https://c/prefix/" {
		t.Fatalf("peers %q", got)
	}
	reg := prometheus.NewRegistry()
	src, err := c.peers.source(nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	cl, ok := src.(*tailfn.Cluster)
	if !ok || len(cl.Shards()) != 4 || cl.Shards()[3].Name() != "https://c/prefix" {
		t.Fatalf("source %T with shards %v", src, cl)
	}
	if n, err := testutil.GatherAndCount(reg, "tailroot_records_peer_rounds_total"); err != nil || n != 3 {
		t.Errorf("%d rounds series, want one per peer (3): %v", n, err)
	}
	cfg := filepath.Join(t.TempDir(), "http.yml")
	if err := os.WriteFile(cfg, []byte("basic_auth:\n  username: u\n  password: p\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--records.peer=ftp://x"}, "--records.peer"},
		{[]string{"--records.peer=localhost:9490"}, "--records.peer"},
		{[]string{"--records.peer.http-config=" + cfg}, "without --records.peer"},
		{[]string{"--records.peer=http://a", "--records.peer.http-config=/nonexistent.yml"}, "--records.peer.http-config"},
	} {
		c, _, err := parseServeFlags(tc.args)
		if err == nil {
			_, err = c.peers.source(nil, nil)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %s", tc.args, err, tc.want)
		}
	}
	c, _, _ = parseServeFlags([]string{"--records.peer=http://a", "--records.peer.http-config=" + cfg})
	if _, err := c.peers.source(nil, nil); err != nil {
		t.Errorf("with an http config: %v", err)
	}
}

// TestPartialResponseParam checks that the partial_response parameter of
// queries reaches the context, in the URL and in a POST form, and that a
// value that is not a boolean is a 400.
func TestPartialResponseParam(t *testing.T) {
	var seen []string
	h := (&peersConfig{}).wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("query") == "" {
			t.Error("query parameter lost")
		}
		seen = append(seen, r.URL.Path+" "+strings.TrimSpace(map[bool]string{true: "partial", false: "full"}[tailfn.PartialResponseFrom(r.Context(), false)]))
	}))
	for _, r := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/api/v1/query?query=1&partial_response=true", nil),
		httptest.NewRequest(http.MethodGet, "/api/v1/query_range?query=1&partial_response=false", nil),
		httptest.NewRequest(http.MethodGet, "/api/v1/query?query=1", nil),
	} {
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	post := httptest.NewRequest(http.MethodPost, "/api/v1/query", strings.NewReader("query=1&partial_response=1"))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	h.ServeHTTP(httptest.NewRecorder(), post)
	want := "/api/v1/query partial,/api/v1/query_range full,/api/v1/query full,/api/v1/query partial"
	if got := strings.Join(seen, ","); got != want {
		t.Errorf("seen %s, want %s", got, want)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v1/query?query=1&partial_response=maybe", nil))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "partial_response") {
		t.Errorf("partial_response=maybe: %d %s", w.Code, w.Body)
	}
}
