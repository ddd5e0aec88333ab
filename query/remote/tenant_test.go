package remote

import (
	"context"
	"net"
	"slices"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tailroot/tailroot/internal/tenant"
	"github.com/tailroot/tailroot/query/remote/storepb"
	"github.com/tailroot/tailroot/tsdb"
)

// tenantFake is a fakeStore that records the tenant metadata of each
// Series call.
type tenantFake struct {
	fakeStore
	tenants []string
}

func (f *tenantFake) Series(r *storepb.SeriesRequest, srv grpc.ServerStreamingServer[storepb.SeriesResponse]) error {
	md, _ := metadata.FromIncomingContext(srv.Context())
	f.tenants = append(f.tenants, md.Get(thanosTenantKey)...)
	return f.fakeStore.Series(r, srv)
}

// TestStoreAPICarriesTenant reads a StoreAPI endpoint through the tenant
// wrapper the API puts over the global view: the store gets the tenant
// matcher and the thanos-tenant metadata, and the answer comes back
// without the tenant label.
func TestStoreAPICarriesTenant(t *testing.T) {
	f := &tenantFake{fakeStore: fakeStore{series: []*storepb.Series{{
		Labels: []*storepb.Label{{Name: "__name__", Value: "x"}, {Name: "tenant_id", Value: "team-a"}},
		Chunks: []*storepb.AggrChunk{xorChunk(t, sample{1000, 1})},
	}}}}
	s, err := NewStoreAPI(StoreAPIOptions{Address: serveTenantFake(t, f)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	ctx := tenant.NewContext(context.Background(), tenant.NewResolver(tenant.DefaultOptions()).Tenant("team-a"))
	got, _, err := selectAll(t, ctx, tsdb.TenantQueryable(s), labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, "x"))
	if err != nil {
		t.Fatal(err)
	}
	if w := got[`{__name__="x"}`]; len(got) != 1 || !slices.Equal(w, []sample{{1000, 1}}) {
		t.Errorf("got %v, want x without its tenant label", got)
	}
	if !slices.Equal(f.tenants, []string{"team-a"}) {
		t.Errorf("thanos-tenant metadata %v, want [team-a]", f.tenants)
	}
	var ms []string
	for _, m := range f.last.Matchers {
		ms = append(ms, m.Name+m.Type.String()+m.Value)
	}
	if !slices.Contains(ms, "tenant_id"+storepb.LabelMatcher_EQ.String()+"team-a") {
		t.Errorf("store matchers %v lack tenant_id=team-a", ms)
	}
}

func serveTenantFake(t *testing.T, f *tenantFake) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	storepb.RegisterStoreServer(srv, f)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}
