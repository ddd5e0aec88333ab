package api

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/tailroot/tailroot/internal/httpapi"
	"github.com/tailroot/tailroot/query/tailfn"
)

// RecordsShardPath is where a tailroot server answers the rounds of the
// distributed tail protocol over its own records
// (docs/distributed-tails.md).
const RecordsShardPath = tailfn.PeerShardPath

// Limits on one shard request: the protocol sends at most a few thousand
// thresholds per round, so anything far larger is refused rather than
// worked through.
const (
	maxShardBody  = 8 << 20
	maxShardItems = 1 << 16
)

// RecordsShard serves POST /api/v1/records/shard: a JSON
// tailfn.ShardRequest (optionally gzip-encoded) in, the
// tailfn.ShardResponse in the Prometheus envelope out. A malformed request
// is 400 bad_data naming what is wrong; a window whose records changed
// between rounds is 409; a store failure is 500.
type RecordsShard struct {
	shard *tailfn.LocalShard
}

// NewRecordsShard returns the endpoint over shard.
func NewRecordsShard(shard *tailfn.LocalShard) *RecordsShard { return &RecordsShard{shard: shard} }

// DecodeShardRequest reads a shard request body, gunzipping it when
// encoding is "gzip", and checks its sizes.
func DecodeShardRequest(body io.Reader, encoding string) (*tailfn.ShardRequest, error) {
	r := io.LimitReader(body, maxShardBody+1)
	switch encoding {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		defer zr.Close()
		r = io.LimitReader(zr, maxShardBody+1)
	default:
		return nil, fmt.Errorf("content encoding %q: want gzip or none", encoding)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if len(b) > maxShardBody {
		return nil, fmt.Errorf("body over %d bytes", maxShardBody)
	}
	var req tailfn.ShardRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, fmt.Errorf("decode shard request: %w", err)
	}
	for _, c := range []struct {
		name string
		n    int
	}{{"splits", len(req.Splits)}, {"at", len(req.At)}, {"sums", len(req.Sums)}, {"ties", len(req.Ties)}} {
		if c.n > maxShardItems {
			return nil, fmt.Errorf("%s: %d items, over the limit of %d", c.name, c.n, maxShardItems)
		}
	}
	work := 0
	for i, sp := range req.Splits {
		if sp.Fanout < 1 || sp.Fanout > maxShardItems {
			return nil, fmt.Errorf("splits[%d]: fanout %d outside [1, %d]", i, sp.Fanout, maxShardItems)
		}
		if work += sp.Fanout; work > maxShardItems {
			return nil, fmt.Errorf("splits: %d thresholds in all, over the limit of %d", work, maxShardItems)
		}
	}
	if req.Query == "" {
		return nil, errors.New("query: missing the query id")
	}
	if req.Kernel != nil && !(req.Kernel.BW > 0) {
		return nil, fmt.Errorf("kernel: bandwidth %v must be positive", req.Kernel.BW)
	}
	return &req, nil
}

func (h *RecordsShard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := DecodeShardRequest(r.Body, r.Header.Get("Content-Encoding"))
	if err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, httpapi.ErrBadData, err.Error())
		return
	}
	resp, err := h.shard.Stats(r.Context(), req)
	switch {
	case errors.Is(err, tailfn.ErrBadShardRequest):
		httpapi.WriteError(w, http.StatusBadRequest, httpapi.ErrBadData, err.Error())
		return
	case errors.Is(err, tailfn.ErrSnapshotChanged):
		httpapi.WriteError(w, http.StatusConflict, httpapi.ErrExecution, err.Error())
		return
	case err != nil:
		httpapi.WriteError(w, http.StatusInternalServerError, httpapi.ErrInternal, err.Error())
		return
	}
	httpapi.WriteData(w, resp)
}
