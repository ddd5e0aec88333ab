package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/prometheus/config"

	"github.com/tailroot/tailroot/api"
)

// discoveredPeer is a remote_read entry found to be a tailroot server.
type discoveredPeer struct {
	url    string
	client *http.Client
}

// discoverFrom adds, with --records.peer.discover, the remote_read
// entries of cfg that are tailroot servers as peers, each reached with its
// own http_config (docs/distributed-tails.md). A remote_read URL ending in
// /api/v1/read names the server at the URL before that suffix; its
// /api/v1/records/shard is probed with an empty request. A server that
// answers 404 there (Prometheus, Thanos, Mimir) is not a peer; any other
// answer — tailroot refuses the empty request with 400 — makes it one. An
// entry that cannot be reached at start-up is kept as a peer, with a
// warning, so that its records are never silently missing from an
// answer: queries then fail naming it (or, with partial_response=true,
// say it was left out).
func (c *peersConfig) discoverFrom(cfg *config.Config, logger *slog.Logger) {
	if !c.discover || cfg == nil {
		return
	}
	for _, rr := range cfg.RemoteReadConfigs {
		if rr == nil || rr.URL == nil {
			continue
		}
		base := strings.TrimSuffix(strings.TrimRight(rr.URL.String(), "/"), "/api/v1/read")
		client, err := promconfig.NewClientFromConfig(rr.HTTPClientConfig, "records_peer")
		if err != nil {
			logger.Warn("remote_read entry not usable as a records peer", "remote_read", rr.Name, "url", base, "err", err)
			continue
		}
		client.Timeout = 10 * time.Second
		switch peer, err := probePeer(client, base); {
		case err != nil:
			logger.Warn("records peer candidate unreachable at start-up; kept as a peer, queries fail naming it until it answers", "remote_read", rr.Name, "url", base, "err", err)
		case !peer:
			logger.Info("remote_read entry is not a tailroot server; not a records peer", "remote_read", rr.Name, "url", base)
			continue
		default:
			logger.Info("records peer discovered from remote_read", "remote_read", rr.Name, "url", base)
		}
		c.discovered = append(c.discovered, discoveredPeer{url: base, client: client})
	}
}

// probePeer reports whether base answers the records shard endpoint.
func probePeer(client *http.Client, base string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+api.RecordsShardPath, bytes.NewReader([]byte("{}")))
	if err != nil {
		return false, fmt.Errorf("probe: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return false, fmt.Errorf("probe: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode != http.StatusNotFound, nil
}
