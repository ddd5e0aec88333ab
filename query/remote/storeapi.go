package remote

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tailroot/tailroot/internal/tenant"
	"github.com/tailroot/tailroot/query/remote/storepb"
)

// StoreAPIOptions configures a client of one Thanos StoreAPI endpoint.
type StoreAPIOptions struct {
	// Address is the endpoint's gRPC host:port (a Thanos Query's, Store's or
	// Sidecar's --grpc-address).
	Address string
	// TLS, when set, is used to connect; nil means plaintext.
	TLS *tls.Config
	// Timeout bounds one call; zero means only the query's own deadline.
	Timeout time.Duration
	// MaxRecvBytes is the largest message accepted (one series with its
	// chunks); zero means 256 MiB.
	MaxRecvBytes int
	// MaxSourceResolution is the coarsest downsampled resolution read
	// (Thanos Query's max_source_resolution): zero reads raw data only,
	// AutoResolution a fifth of each query's step. WithMaxSourceResolution
	// overrides it per query.
	MaxSourceResolution time.Duration
}

// StoreAPI reads series from a Thanos StoreAPI endpoint over gRPC, speaking
// the published protocol (package storepb), and implements Store.
type StoreAPI struct {
	opts   StoreAPIOptions
	conn   *grpc.ClientConn
	client storepb.StoreClient
}

// NewStoreAPI returns a client of opts.Address. It connects lazily: an
// endpoint that is down fails the queries that read it, not the start.
func NewStoreAPI(opts StoreAPIOptions) (*StoreAPI, error) {
	if opts.Address == "" {
		return nil, errors.New("store endpoint: empty address")
	}
	if opts.MaxRecvBytes <= 0 {
		opts.MaxRecvBytes = 256 << 20
	}
	creds := insecure.NewCredentials()
	if opts.TLS != nil {
		creds = credentials.NewTLS(opts.TLS)
	}
	conn, err := grpc.NewClient(opts.Address,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(opts.MaxRecvBytes)))
	if err != nil {
		return nil, fmt.Errorf("store endpoint %s: %w", opts.Address, err)
	}
	return &StoreAPI{opts: opts, conn: conn, client: storepb.NewStoreClient(conn)}, nil
}

// Name is the endpoint's address.
func (s *StoreAPI) Name() string { return s.opts.Address }

// Close closes the connection.
func (s *StoreAPI) Close() error { return s.conn.Close() }

// Querier implements storage.Queryable.
func (s *StoreAPI) Querier(mint, maxt int64) (storage.Querier, error) {
	return &storeAPIQuerier{s: s, mint: mint, maxt: maxt}, nil
}

type storeAPIQuerier struct {
	s          *StoreAPI
	mint, maxt int64
}

func (q *storeAPIQuerier) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if t := tenant.FromContext(ctx); t != nil {
		// Thanos' tenancy reads the tenant of a StoreAPI call from this
		// gRPC metadata key (Thanos Query's --query.tenant-header is
		// forwarded as it). The selection itself is already confined by
		// the tenant label matcher.
		ctx = metadata.AppendToOutgoingContext(ctx, thanosTenantKey, t.ID)
	}
	if q.s.opts.Timeout > 0 {
		return context.WithTimeout(ctx, q.s.opts.Timeout)
	}
	return context.WithCancel(ctx)
}

// thanosTenantKey is the gRPC metadata key of the tenant in Thanos.
const thanosTenantKey = "thanos-tenant"

func strategy(ctx context.Context) storepb.PartialResponseStrategy {
	// The store's own partial response follows ours: without it, Thanos
	// Query must fail when one of its stores fails instead of warning.
	if partialAllowed(ctx, true) {
		return storepb.PartialResponseStrategy_WARN
	}
	return storepb.PartialResponseStrategy_ABORT
}

// Select reads the whole stream before returning; see the package doc.
func (q *storeAPIQuerier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	req := &storepb.SeriesRequest{
		MinTime:                 q.mint,
		MaxTime:                 q.maxt,
		Matchers:                matchersToPB(ms),
		PartialResponseStrategy: strategy(ctx),
		PartialResponseDisabled: strategy(ctx) == storepb.PartialResponseStrategy_ABORT,
	}
	var aggrs []storepb.Aggr
	if hints != nil {
		req.SkipChunks = hints.Func == "series"
		req.Step = hints.Step
		req.Range = hints.Range
		aggrs = aggrsForFunc(hints.Func)
	} else {
		aggrs = aggrsForFunc("")
	}
	// Asked for raw data only, a store's aggregate chunks are its error
	// (aggrs nil), as before downsampled reads existed.
	if req.MaxResolutionWindow = maxResolutionWindow(ctx, q.s.opts.MaxSourceResolution, hints); req.MaxResolutionWindow > 0 {
		req.Aggregates = aggrs
	} else {
		aggrs = nil
	}
	ctx, cancel := q.ctx(ctx)
	defer cancel()
	stream, err := q.s.client.Series(ctx, req)
	if err != nil {
		return storage.ErrSeriesSet(fmt.Errorf("series: %w", err))
	}
	var (
		out   []storage.Series
		annos annotations.Annotations
	)
	add := func(ps *storepb.Series) error {
		s, err := seriesFromPB(ps, aggrs)
		if err != nil {
			return err
		}
		out = append(out, s)
		return nil
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return storage.ErrSeriesSet(fmt.Errorf("series: %w", err))
		}
		switch r := resp.GetResult().(type) {
		case *storepb.SeriesResponse_Series:
			err = add(r.Series)
		case *storepb.SeriesResponse_Batch:
			for _, ps := range r.Batch.GetSeries() {
				if err = add(ps); err != nil {
					break
				}
			}
		case *storepb.SeriesResponse_Warning:
			annos.Add(fmt.Errorf("%w: store %s: %s", annotations.PromQLWarning, q.s.Name(), r.Warning))
		}
		if err != nil {
			return storage.ErrSeriesSet(err)
		}
	}
	return &sliceSet{series: sortAndMerge(out, storage.ChainedSeriesMerge), warnings: annos}
}

func (q *storeAPIQuerier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	req := &storepb.LabelValuesRequest{
		Label: name, Start: q.mint, End: q.maxt, Matchers: matchersToPB(ms),
		PartialResponseStrategy: strategy(ctx),
	}
	if hints != nil {
		req.Limit = int64(hints.Limit)
	}
	ctx, cancel := q.ctx(ctx)
	defer cancel()
	resp, err := q.s.client.LabelValues(ctx, req)
	if err != nil {
		return nil, nil, fmt.Errorf("label values: %w", err)
	}
	return resp.GetValues(), q.warnings(resp.GetWarnings()), nil
}

func (q *storeAPIQuerier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	req := &storepb.LabelNamesRequest{
		Start: q.mint, End: q.maxt, Matchers: matchersToPB(ms),
		PartialResponseStrategy: strategy(ctx),
	}
	if hints != nil {
		req.Limit = int64(hints.Limit)
	}
	ctx, cancel := q.ctx(ctx)
	defer cancel()
	resp, err := q.s.client.LabelNames(ctx, req)
	if err != nil {
		return nil, nil, fmt.Errorf("label names: %w", err)
	}
	return resp.GetNames(), q.warnings(resp.GetWarnings()), nil
}

func (q *storeAPIQuerier) warnings(ws []string) annotations.Annotations {
	var a annotations.Annotations
	for _, w := range ws {
		a.Add(fmt.Errorf("%w: store %s: %s", annotations.PromQLWarning, q.s.Name(), w))
	}
	return a
}

func (*storeAPIQuerier) Close() error { return nil }

func matchersToPB(ms []*labels.Matcher) []*storepb.LabelMatcher {
	out := make([]*storepb.LabelMatcher, 0, len(ms))
	for _, m := range ms {
		var t storepb.LabelMatcher_Type
		switch m.Type {
		case labels.MatchEqual:
			t = storepb.LabelMatcher_EQ
		case labels.MatchNotEqual:
			t = storepb.LabelMatcher_NEQ
		case labels.MatchRegexp:
			t = storepb.LabelMatcher_RE
		case labels.MatchNotRegexp:
			t = storepb.LabelMatcher_NRE
		}
		out = append(out, &storepb.LabelMatcher{Type: t, Name: m.Name, Value: m.Value})
	}
	return out
}
