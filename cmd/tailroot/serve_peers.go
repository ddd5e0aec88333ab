package main

import (
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	promconfig "github.com/prometheus/common/config"

	"github.com/tailroot/tailroot/api"
	"github.com/tailroot/tailroot/query/tailfn"
)

// peersConfig holds the flags of exact tail queries across tailroot
// servers (docs/distributed-tails.md).
type peersConfig struct {
	urls       []string
	httpConfig string
	partial    bool
	// discover adds the remote_read entries that are tailroot servers
	// (serve_peers_discover.go); discovered holds them.
	discover   bool
	discovered []discoveredPeer
}

// peerList is a repeatable flag of comma-separated URLs.
type peerList struct{ v *[]string }

func (p peerList) String() string {
	if p.v == nil {
		return ""
	}
	return strings.Join(*p.v, ",")
}

func (p peerList) Set(s string) error {
	*p.v = append(*p.v, splitList(s)...)
	return nil
}

func addPeerFlags(fs *flag.FlagSet, c *peersConfig) {
	fs.Var(peerList{&c.urls}, "records.peer", "URL of another tailroot server whose request records tail_mean, tail_excess, tail_euler, tail_heat, quantile_ci, quantile_diff_ci and tail_shapley also read, exactly (repeatable, or comma-separated)")
	fs.StringVar(&c.httpConfig, "records.peer.http-config", "", "file in Prometheus' http_config format (basic_auth, authorization, tls_config, proxy_url) used to reach every --records.peer")
	fs.BoolVar(&c.discover, "records.peer.discover", false, "also read the records of the remote_read servers of --config.file that are tailroot servers (probed at start-up on /api/v1/records/shard; each reached with its remote_read http_config)")
	fs.BoolVar(&c.partial, "records.partial-response", false, "when a peer does not answer, return the other nodes' answer with a warning instead of an error (a query's partial_response parameter overrides it)")
}

// source returns the record source the query engine reads: the local store
// alone without peers, else a cluster of the store and the peers.
// Each peer's rounds, failed rounds and body bytes are exported on reg
// (nil registers nothing).
func (c *peersConfig) source(local tailfn.ColumnSource, reg prometheus.Registerer) (tailfn.RecordSource, error) {
	if len(c.urls) == 0 && len(c.discovered) == 0 {
		if c.httpConfig != "" {
			return nil, fmt.Errorf("--records.peer.http-config without --records.peer")
		}
		return local, nil
	}
	client := http.DefaultClient
	if c.httpConfig != "" {
		cfg, _, err := promconfig.LoadHTTPConfigFile(c.httpConfig)
		if err != nil {
			return nil, fmt.Errorf("--records.peer.http-config: %w", err)
		}
		if client, err = promconfig.NewClientFromConfig(*cfg, "records_peer"); err != nil {
			return nil, fmt.Errorf("--records.peer.http-config: %w", err)
		}
	}
	var peers []tailfn.Shard
	for _, u := range c.urls {
		p, err := tailfn.NewPeerShard(u, client)
		if err != nil {
			return nil, fmt.Errorf("--records.peer: %w", err)
		}
		peers = append(peers, p)
		if reg != nil {
			registerPeerMetrics(reg, p)
		}
	}
	for _, d := range c.discovered {
		if slices.ContainsFunc(peers, func(s tailfn.Shard) bool { return s.Name() == strings.TrimRight(d.url, "/") }) {
			continue // named by --records.peer as well: counted once
		}
		p, err := tailfn.NewPeerShard(d.url, d.client)
		if err != nil {
			return nil, fmt.Errorf("records peer from remote_read: %w", err)
		}
		peers = append(peers, p)
		if reg != nil {
			registerPeerMetrics(reg, p)
		}
	}
	opts := tailfn.DefaultClusterOptions()
	opts.PartialResponse = c.partial
	return tailfn.NewCluster(local, peers, opts, tailfn.DefaultShardOptions()), nil
}

// clusterOf is the cluster the attribution endpoints answer over: src
// when source made one (the server has peers), else nil (local records).
func clusterOf(src tailfn.RecordSource) *tailfn.Cluster {
	cl, _ := src.(*tailfn.Cluster)
	return cl
}

// register mounts the endpoint peers call; every server answers it, so
// any server can be named as a peer.
func (c *peersConfig) register(r *mux.Router, local tailfn.RecordSource) {
	r.Handle(api.RecordsShardPath, api.NewRecordsShard(tailfn.NewLocalShard(local, tailfn.DefaultShardOptions()))).Methods(http.MethodPost)
}

// wrap reads the partial_response parameter of queries (as Thanos names
// it) into the context the record functions see.
func (c *peersConfig) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" && r.URL.Path != "/api/v1/query_range" {
			h.ServeHTTP(w, r)
			return
		}
		v := r.FormValue("partial_response")
		if v == "" {
			h.ServeHTTP(w, r)
			return
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"status":"error","errorType":"bad_data","error":%q}`, fmt.Sprintf("partial_response: %q is not a boolean", v))
			return
		}
		h.ServeHTTP(w, r.WithContext(tailfn.WithPartialResponse(r.Context(), b)))
	})
}

// registerPeerMetrics exports a peer's counters.
func registerPeerMetrics(reg prometheus.Registerer, p *tailfn.PeerShard) {
	peer := prometheus.Labels{"peer": p.Name()}
	counter := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: peer}, f))
	}
	counter("tailroot_records_peer_rounds_total", "Rounds of the distributed tail protocol sent to the peer.", func() float64 { return float64(p.Rounds()) })
	counter("tailroot_records_peer_failed_rounds_total", "Rounds the peer did not answer (connection error, non-2xx, malformed reply, deadline).", func() float64 { return float64(p.Failed()) })
	counter("tailroot_records_peer_sent_bytes_total", "Body bytes sent to the peer (compressed when compressed).", func() float64 { s, _ := p.BytesExchanged(); return float64(s) })
	counter("tailroot_records_peer_received_bytes_total", "Body bytes received from the peer (compressed when compressed).", func() float64 { _, r := p.BytesExchanged(); return float64(r) })
}
