package tailfn

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tailroot/tailroot/internal/tenant"
)

// TestPeerShardSendsTenant checks that a round sent for a tenant names it
// in the tenant header, so a peer with tenancy on confines the round to
// the same tenant; without one no header is sent.
func TestPeerShardSendsTenant(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("X-Org"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"n":0}}`))
	}))
	defer srv.Close()
	p, err := NewPeerShard(srv.URL, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	res := tenant.NewResolver(tenant.Options{Header: "X-Org"})
	ctx := tenant.NewContext(context.Background(), res.Tenant("team-a"))
	req := &ShardRequest{Query: "q", Selector: `{a="b"}`, Maxt: 1, Summary: true}
	if _, err := p.Stats(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Stats(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "team-a" || got[1] != "" {
		t.Errorf("tenant headers %q, want [team-a \"\"]", got)
	}
}
