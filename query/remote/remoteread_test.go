package remote

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"

	config_util "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	promremote "github.com/prometheus/prometheus/storage/remote"
	"github.com/prometheus/prometheus/util/annotations"
)

// TestRemoteReadConfig checks that remote_read entries keep Prometheus'
// meaning: read_recent false reads only before local data starts,
// required_matchers gate the entry, and label lookups are an info.
func TestRemoteReadConfig(t *testing.T) {
	peer := promqltest.LoadedStorage(t, "load 1m\n\tx{instance=\"p\", job=\"j\"} 1 2 3 4 5\n")
	srv := httptest.NewServer(promremote.NewReadHandler(nil, nil, peer, func() config.Config { return config.DefaultConfig }, 5e7, 10, 1<<20))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)

	entry := func(mod func(*config.RemoteReadConfig)) *config.Config {
		rr := config.DefaultRemoteReadConfig
		rr.Name, rr.URL, rr.HTTPClientConfig = "peer", &config_util.URL{URL: u}, config_util.DefaultHTTPClientConfig
		mod(&rr)
		cfg := config.DefaultConfig
		cfg.RemoteReadConfigs = []*config.RemoteReadConfig{&rr}
		return &cfg
	}
	count := func(cfg *config.Config, localStart int64, ms ...*labels.Matcher) (int, annotations.Annotations) {
		t.Helper()
		stores, err := RemoteReadStores(cfg, func() (int64, error) { return localStart, nil })
		if err != nil {
			t.Fatal(err)
		}
		opts := DefaultOptions()
		opts.Stores = func() []Store { return stores }
		got, a, err := selectAll(t, context.Background(), New(nil, opts), ms...)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range got {
			n += len(s)
		}
		return n, a
	}
	x := metric("x")

	if n, _ := count(entry(func(rr *config.RemoteReadConfig) { rr.ReadRecent = true }), 0, x); n != 5 {
		t.Errorf("read_recent: %d samples, want 5", n)
	}
	// Local data from 150 s on: without read_recent only [0, 150 s] is read.
	if n, _ := count(entry(func(rr *config.RemoteReadConfig) {}), 150000, x); n != 3 {
		t.Errorf("without read_recent: %d samples, want the 3 before local data starts", n)
	}
	req := entry(func(rr *config.RemoteReadConfig) {
		rr.ReadRecent = true
		rr.RequiredMatchers = model.LabelSet{"job": "j"}
	})
	if n, _ := count(req, 0, x); n != 0 {
		t.Errorf("required_matchers not in the query: %d samples, want 0", n)
	}
	if n, _ := count(req, 0, x, labels.MustNewMatcher(labels.MatchEqual, "job", "j")); n != 5 {
		t.Errorf("required_matchers in the query: %d samples, want 5", n)
	}

	stores, _ := RemoteReadStores(entry(func(rr *config.RemoteReadConfig) { rr.ReadRecent = true }), nil)
	opts := DefaultOptions()
	opts.Stores = func() []Store { return stores }
	q, _ := New(nil, opts).Querier(0, 1<<40)
	names, a, err := q.LabelNames(context.Background(), nil)
	if err != nil || len(names) != 0 || !hasAnno(a, annotations.PromQLInfo, "cannot list label names") {
		t.Errorf("label names through remote read: %v %v %v", names, a, err)
	}
}
