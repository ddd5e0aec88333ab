package main

import (
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	config_util "github.com/prometheus/common/config"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/internal/promcfg"
	"github.com/tailroot/tailroot/query/remote"
	"github.com/tailroot/tailroot/tsdb"
)

// listFlag is a repeatable flag; a comma-separated value adds each item.
type listFlag struct{ v *[]string }

func (l listFlag) String() string {
	if l.v == nil {
		return ""
	}
	return strings.Join(*l.v, ",")
}

func (l listFlag) Set(s string) error {
	*l.v = append(*l.v, splitList(s)...)
	return nil
}

// storesConfig is the global view's command line: Thanos StoreAPI
// endpoints, replica labels and partial response. Remote read endpoints
// come from remote_read in --config.file.
type storesConfig struct {
	endpoints     []string
	replicaLabels []string
	partial       bool
	timeout       time.Duration
	maxResolution string
	tls           bool
	tlsConfig     config_util.TLSConfig
}

func addStoreFlags(fs *flag.FlagSet, c *storesConfig) {
	c.partial = remote.DefaultOptions().PartialResponse
	fs.Var(listFlag{&c.endpoints}, "store.endpoint", "Thanos StoreAPI gRPC endpoint (host:port of a Thanos Query, Store or Sidecar) that queries also read; repeatable")
	fs.Var(listFlag{&c.replicaLabels}, "query.replica-label", "label whose values are replicas of one series: dropped from every series, and the replicas merged; repeatable")
	fs.BoolVar(&c.partial, "query.partial-response", c.partial, "answer a query from the stores that answered when others failed, with a warning naming them (partial_response=false on a request overrides it)")
	fs.DurationVar(&c.timeout, "store.timeout", 0, "time limit of one StoreAPI call; 0 means the query's own timeout")
	fs.StringVar(&c.maxResolution, "store.max-source-resolution", "0s", "coarsest downsampled resolution read from --store.endpoint (Thanos' max_source_resolution: 0s raw only, 5m, 1h, or auto for a fifth of the query step); a query's max_source_resolution overrides it")
	fs.BoolVar(&c.tls, "store.tls", false, "connect to --store.endpoint over TLS")
	fs.StringVar(&c.tlsConfig.CAFile, "store.tls.ca-file", "", "CA certificates that verify StoreAPI servers (implies --store.tls)")
	fs.StringVar(&c.tlsConfig.CertFile, "store.tls.cert-file", "", "client certificate for StoreAPI endpoints (implies --store.tls)")
	fs.StringVar(&c.tlsConfig.KeyFile, "store.tls.key-file", "", "client key for StoreAPI endpoints")
	fs.StringVar(&c.tlsConfig.ServerName, "store.tls.server-name", "", "server name the StoreAPI certificates must carry; empty means the endpoint's host")
	fs.BoolVar(&c.tlsConfig.InsecureSkipVerify, "store.tls.insecure-skip-verify", false, "do not verify StoreAPI server certificates")
}

// queryable builds the global view over db: the remote_read entries of the
// configuration in force and the StoreAPI endpoints. Without any, queries
// read db exactly as before. The returned function closes the endpoints.
func (c *storesConfig) queryable(cfg *promcfg.Holder, db *tsdb.DB, logger *slog.Logger, reg prometheus.Registerer) (*remote.Queryable, func(), error) {
	var fixed []remote.Store
	closeAll := func() {
		for _, s := range fixed {
			if err := s.(*remote.StoreAPI).Close(); err != nil {
				logger.Warn("close store endpoint", "store", s.Name(), "err", err)
			}
		}
	}
	so := remote.StoreAPIOptions{Timeout: c.timeout}
	if c.maxResolution != "" {
		d, err := remote.ParseMaxSourceResolution(c.maxResolution)
		if err != nil {
			return nil, nil, fmt.Errorf("--store.max-source-resolution: %w", err)
		}
		so.MaxSourceResolution = d
	}
	if c.tls || c.tlsConfig.CAFile != "" || c.tlsConfig.CertFile != "" {
		t, err := config_util.NewTLSConfig(&c.tlsConfig)
		if err != nil {
			return nil, nil, fmt.Errorf("store endpoint TLS: %w", err)
		}
		so.TLS = t
	}
	for _, addr := range c.endpoints {
		so.Address = addr
		s, err := remote.NewStoreAPI(so)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		fixed = append(fixed, s)
	}
	stores, err := remote.NewConfigStores(cfg.Get, db.StartTime, fixed, logger)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	opts := remote.DefaultOptions()
	opts.Stores = stores.Stores
	opts.ExternalLabels = func() labels.Labels { return cfg.Get().GlobalConfig.ExternalLabels }
	opts.ReplicaLabels = c.replicaLabels
	opts.PartialResponse = c.partial
	opts.Registerer = reg
	if n := len(stores.Stores()); n > 0 {
		logger.Info("queries read the global view", "stores", n, "replica_labels", strings.Join(c.replicaLabels, ","))
	}
	return remote.New(db, opts), closeAll, nil
}
