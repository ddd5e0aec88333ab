package tailfn

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/tailroot/tailroot/internal/tenant"
)

// PeerShardPath is the endpoint a peer answers the protocol on.
const PeerShardPath = "/api/v1/records/shard"

// PeerShard is a tailroot server reached over HTTP: each round is one POST
// of a JSON ShardRequest to PeerShardPath, gzip-compressed both ways when
// larger than 1 KiB.
type PeerShard struct {
	base   string
	client *http.Client
	// sent and received count body bytes on the wire (compressed when
	// compressed), for BytesExchanged.
	sent, received atomic.Int64
	rounds, failed atomic.Int64
}

// NewPeerShard returns the peer at base (scheme://host[:port][/prefix]),
// reached through client (nil means http.DefaultClient).
func NewPeerShard(base string, client *http.Client) (*PeerShard, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("peer %q: %w", base, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("peer %q: want http:// or https:// and a host", base)
	}
	if client == nil {
		client = http.DefaultClient
	}
	return &PeerShard{base: strings.TrimSuffix(u.String(), "/"), client: client}, nil
}

// Name is the peer's URL.
func (p *PeerShard) Name() string { return p.base }

// BytesExchanged returns the body bytes sent to and received from the
// peer so far.
func (p *PeerShard) BytesExchanged() (sent, received int64) { return p.sent.Load(), p.received.Load() }

// Rounds returns the number of rounds sent to the peer so far.
func (p *PeerShard) Rounds() int64 { return p.rounds.Load() }

// Failed returns the number of rounds the peer did not answer.
func (p *PeerShard) Failed() int64 { return p.failed.Load() }

// Stats runs one round on the peer.
func (p *PeerShard) Stats(ctx context.Context, req *ShardRequest) (*ShardResponse, error) {
	resp, err := p.stats(ctx, req)
	if err != nil {
		p.failed.Add(1)
	}
	return resp, err
}

func (p *PeerShard) stats(ctx context.Context, req *ShardRequest) (*ShardResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode shard request: %w", err)
	}
	gz := len(body) > 1024
	if gz {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("gzip shard request: %w", err)
		}
		body = b.Bytes()
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+PeerShardPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	if t := tenant.FromContext(ctx); t != nil {
		// The peer confines the round to the same tenant.
		hr.Header.Set(t.Header, t.ID)
	}
	if gz {
		hr.Header.Set("Content-Encoding", "gzip")
	}
	// Asked for explicitly, so the transport leaves the body compressed
	// and the bytes counted are those on the wire.
	hr.Header.Set("Accept-Encoding", "gzip")
	p.sent.Add(int64(len(body)))
	p.rounds.Add(1)
	resp, err := p.client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	cr := &countingReader{r: io.LimitReader(resp.Body, 1<<30)}
	var r io.Reader = cr
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(cr)
		if err != nil {
			return nil, fmt.Errorf("status %d: gzip body: %w", resp.StatusCode, err)
		}
		defer zr.Close()
		r = zr
	}
	b, err := io.ReadAll(r)
	p.received.Add(cr.n)
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	var env struct {
		Status string         `json:"status"`
		Data   *ShardResponse `json:"data"`
		Error  string         `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("status %d: decode answer: %w", resp.StatusCode, err)
	}
	if resp.StatusCode == http.StatusConflict {
		return nil, fmt.Errorf("status %d: %w: %s", resp.StatusCode, ErrSnapshotChanged, env.Error)
	}
	if resp.StatusCode/100 != 2 || env.Status != "success" {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, env.Error)
	}
	if env.Data == nil {
		return nil, fmt.Errorf("status %d: answer without data", resp.StatusCode)
	}
	return env.Data, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}
