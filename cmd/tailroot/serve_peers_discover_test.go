package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/prometheus/config"

	"github.com/tailroot/tailroot/api"
	"github.com/tailroot/tailroot/query/tailfn"
)

// TestPeerDiscovery: with --records.peer.discover, a remote_read entry
// whose server answers the records shard endpoint (a real shard handler
// behind basic auth, reached with the entry's own http_config) becomes a
// peer; a Prometheus-like server (404 there) does not; an unreachable one
// is kept so that queries fail naming it; a URL also named by
// --records.peer counts once; without the flag nothing is discovered.
func TestPeerDiscovery(t *testing.T) {
	shard := api.NewRecordsShard(tailfn.NewLocalShard(nil, tailfn.DefaultShardOptions()))
	mux := http.NewServeMux()
	mux.Handle("/tr"+api.RecordsShardPath, http.StripPrefix("/tr", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "peer" || p != "secret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		shard.ServeHTTP(w, r)
	})))
	tr := httptest.NewServer(mux)
	defer tr.Close()
	prom := httptest.NewServer(http.NotFoundHandler())
	defer prom.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	rr := func(name, u string, auth bool) *config.RemoteReadConfig {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		c := &config.RemoteReadConfig{Name: name, URL: &promconfig.URL{URL: pu}, HTTPClientConfig: promconfig.DefaultHTTPClientConfig}
		if auth {
			c.HTTPClientConfig.BasicAuth = &promconfig.BasicAuth{Username: "peer", Password: "secret"}
		}
		return c
	}
	cfg := &config.Config{RemoteReadConfigs: []*config.RemoteReadConfig{
		rr("tailroot", tr.URL+"/tr/api/v1/read", true),
		rr("prometheus", prom.URL+"/api/v1/read", false),
		rr("down", downURL+"/api/v1/read", false),
	}}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	c, _, err := parseServeFlags([]string{"--records.peer.discover", "--records.peer=" + tr.URL + "/tr"})
	if err != nil {
		t.Fatal(err)
	}
	c.peers.discoverFrom(cfg, logger)
	var got []string
	for _, d := range c.peers.discovered {
		got = append(got, d.url)
	}
	if len(got) != 2 || got[0] != tr.URL+"/tr" || got[1] != downURL {
		t.Fatalf("discovered %q, want the tailroot server and the unreachable one", got)
	}
	src, err := c.peers.source(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := src.(*tailfn.Cluster)
	if n := len(cl.Shards()); n != 3 {
		t.Errorf("%d shards, want 3 (local, the tailroot peer once, the unreachable one)", n)
	}
	// The discovered peer is reached with its remote_read credentials; a
	// server without the route is not a peer.
	ok, err := probePeer(c.peers.discovered[0].client, got[0])
	if err != nil || !ok {
		t.Errorf("probe with the entry's client: %v %v", ok, err)
	}
	ok, err = probePeer(http.DefaultClient, prom.URL)
	if err != nil || ok {
		t.Errorf("probe of a server without the route: %v %v, want not a peer", ok, err)
	}

	off, _, err := parseServeFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	off.peers.discoverFrom(cfg, logger)
	if len(off.peers.discovered) != 0 {
		t.Errorf("discovered %d peers without --records.peer.discover", len(off.peers.discovered))
	}
}
