package remote

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	promremote "github.com/prometheus/prometheus/storage/remote"
	"github.com/prometheus/prometheus/util/annotations"
)

// remoteReadStore is one remote_read entry, read through the prometheus
// module's remote read client and queryable, so url, basic auth/TLS,
// headers, read_recent, required_matchers and filter_external_labels mean
// what they mean in Prometheus.
type remoteReadStore struct {
	name string
	storage.Queryable
}

func (s remoteReadStore) Name() string { return s.name }

// Querier implements storage.Queryable.
func (s remoteReadStore) Querier(mint, maxt int64) (storage.Querier, error) {
	q, err := s.Queryable.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return noLabelAPI{Querier: q, name: s.name}, nil
}

// noLabelAPI answers label names and values of a remote read endpoint:
// the protocol has no such call (the prometheus module's client returns
// "not implemented"), and reading every series to list labels would cost
// a full scan of the peer. The endpoint contributes nothing, and an info
// says so, rather than a warning that it failed.
type noLabelAPI struct {
	storage.Querier
	name string
}

func (n noLabelAPI) info() annotations.Annotations {
	var a annotations.Annotations
	a.Add(fmt.Errorf("%w: store %s is read through remote read, which cannot list label names or values; its labels are not included", annotations.PromQLInfo, n.name))
	return a
}

func (n noLabelAPI) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, n.info(), nil
}

func (n noLabelAPI) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, n.info(), nil
}

// RemoteReadStores returns a Store per remote_read entry of cfg.
// localStartTime says where local data begins: an entry without
// read_recent is only asked for times before it, as in Prometheus.
func RemoteReadStores(cfg *config.Config, localStartTime func() (int64, error)) ([]Store, error) {
	var out []Store
	for i, rr := range cfg.RemoteReadConfigs {
		name := rr.Name
		if name == "" {
			name = fmt.Sprintf("remote_read[%d] %s", i, rr.URL.Redacted())
		}
		c, err := promremote.NewReadClient(name, &promremote.ClientConfig{
			URL:              rr.URL,
			Timeout:          rr.RemoteTimeout,
			ChunkedReadLimit: rr.ChunkedReadLimit,
			HTTPClientConfig: rr.HTTPClientConfig,
			Headers:          rr.Headers,
		})
		if err != nil {
			return nil, fmt.Errorf("remote_read %s: %w", name, err)
		}
		// filter_external_labels (default true, as in Prometheus) sends the
		// local external labels as matchers: right for a remote store that
		// holds this server's own history, wrong for a peer with other
		// external labels — set it false there.
		ext := labels.EmptyLabels()
		if rr.FilterExternalLabels {
			ext = cfg.GlobalConfig.ExternalLabels
		}
		out = append(out, remoteReadStore{
			name:      name,
			Queryable: promremote.NewSampleAndChunkQueryableClient(c, ext, equalityMatchers(rr.RequiredMatchers), rr.ReadRecent, localStartTime),
		})
	}
	return out, nil
}

func equalityMatchers(ls model.LabelSet) []*labels.Matcher {
	out := make([]*labels.Matcher, 0, len(ls))
	for k, v := range ls {
		out = append(out, labels.MustNewMatcher(labels.MatchEqual, string(k), string(v)))
	}
	return out
}

// ConfigStores gives the stores in force: the remote_read entries of the
// current configuration (rebuilt when the configuration changes) and a
// fixed list (the StoreAPI endpoints of the command line).
type ConfigStores struct {
	config         func() *config.Config
	localStartTime func() (int64, error)
	fixed          []Store
	logger         *slog.Logger

	mu     sync.Mutex
	cfg    *config.Config
	stores []Store
}

// NewConfigStores reads remote_read entries from config() and adds fixed.
func NewConfigStores(config func() *config.Config, localStartTime func() (int64, error), fixed []Store, logger *slog.Logger) (*ConfigStores, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &ConfigStores{config: config, localStartTime: localStartTime, fixed: fixed, logger: logger}
	cfg := config()
	rr, err := RemoteReadStores(cfg, localStartTime)
	if err != nil {
		return nil, err
	}
	c.cfg, c.stores = cfg, append(rr, fixed...)
	return c, nil
}

// Stores returns the stores in force. A configuration whose remote_read
// entries cannot be built keeps the previous stores, with an error logged.
func (c *ConfigStores) Stores() []Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cfg := c.config(); cfg != c.cfg {
		rr, err := RemoteReadStores(cfg, c.localStartTime)
		if err != nil {
			c.logger.Error("remote_read configuration not applied; keeping the previous stores", "err", err)
		} else {
			c.stores = append(rr, c.fixed...)
		}
		c.cfg = cfg
	}
	return c.stores
}
