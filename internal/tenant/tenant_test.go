package tenant

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func TestValidateID(t *testing.T) {
	for _, id := range []string{"a", "team-a", "A_1.b", "x(y)*'!", strings.Repeat("a", 150)} {
		if err := ValidateID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", "a|b", "a b", "ü", strings.Repeat("a", 151), "a\x00"} {
		if err := ValidateID(id); err == nil {
			t.Errorf("%q accepted", id)
		}
	}
}

func TestConfigOverridesKeepDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(`
limits:
  max_active_series: 100
  samples_per_second: 10
overrides:
  big:
    max_active_series: 1000
`))
	if err != nil {
		t.Fatal(err)
	}
	if l := c.For("big"); l.MaxActiveSeries != 1000 || l.SamplesPerSecond != 10 {
		t.Errorf("big: %+v, want 1000 series and the default 10 samples/s", l)
	}
	if l := c.For("other"); l.MaxActiveSeries != 100 {
		t.Errorf("other: %+v", l)
	}
	for _, bad := range []string{
		"limits:\n  max_series: 1\n",                  // misspelt key
		"limits:\n  max_active_series: -1\n",          // negative
		"users:\n  - username: u\n    tenants: [a]\n", // no password
		"tokens:\n  - token: t\n",                     // no grants
		"overrides:\n  a/b: {}\n",                     // bad tenant
	} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if c, err := ParseConfig(nil); err != nil || c == nil {
		t.Errorf("empty config: %v", err)
	}
}

func TestResolve(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig([]byte(`
users:
  - username: alice
    password_hash: "` + string(hash) + `"
    tenants: [a]
    read: [b]
tokens:
  - token: agent-token
    write: [a]
  - token: admin-token
    tenants: ["*"]
`))
	if err != nil {
		t.Fatal(err)
	}
	r := NewResolver(Options{Config: c})
	for _, tc := range []struct {
		name   string
		set    func(*http.Request)
		write  bool
		status int // 0: resolves
	}{
		{"no credentials", func(q *http.Request) { q.Header.Set(DefaultHeader, "a") }, false, 401},
		{"wrong password", func(q *http.Request) { q.SetBasicAuth("alice", "x"); q.Header.Set(DefaultHeader, "a") }, false, 401},
		{"unknown user", func(q *http.Request) { q.SetBasicAuth("bob", "pw"); q.Header.Set(DefaultHeader, "a") }, false, 401},
		{"no header", func(q *http.Request) { q.SetBasicAuth("alice", "pw") }, false, 401},
		{"bad header", func(q *http.Request) { q.SetBasicAuth("alice", "pw"); q.Header.Set(DefaultHeader, "a|b") }, false, 400},
		{"alice reads a", func(q *http.Request) { q.SetBasicAuth("alice", "pw"); q.Header.Set(DefaultHeader, "a") }, false, 0},
		{"alice writes a", func(q *http.Request) { q.SetBasicAuth("alice", "pw"); q.Header.Set(DefaultHeader, "a") }, true, 0},
		{"alice reads b", func(q *http.Request) { q.SetBasicAuth("alice", "pw"); q.Header.Set(DefaultHeader, "b") }, false, 0},
		{"alice writes b", func(q *http.Request) { q.SetBasicAuth("alice", "pw"); q.Header.Set(DefaultHeader, "b") }, true, 403},
		{"alice reads c", func(q *http.Request) { q.SetBasicAuth("alice", "pw"); q.Header.Set(DefaultHeader, "c") }, false, 403},
		{"agent writes a", func(q *http.Request) {
			q.Header.Set("Authorization", "Bearer agent-token")
			q.Header.Set(DefaultHeader, "a")
		}, true, 0},
		{"agent reads a", func(q *http.Request) {
			q.Header.Set("Authorization", "Bearer agent-token")
			q.Header.Set(DefaultHeader, "a")
		}, false, 403},
		{"wrong token", func(q *http.Request) { q.Header.Set("Authorization", "Bearer nope"); q.Header.Set(DefaultHeader, "a") }, false, 401},
		{"admin any", func(q *http.Request) {
			q.Header.Set("Authorization", "Bearer admin-token")
			q.Header.Set(DefaultHeader, "zzz")
		}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := httptest.NewRequest(http.MethodGet, "/api/v1/query", nil)
			tc.set(q)
			got, err := r.Resolve(q, tc.write)
			if tc.status == 0 {
				if err != nil || got == nil || got.ID != q.Header.Get(DefaultHeader) || got.Label != DefaultLabel {
					t.Fatalf("got %+v, %v", got, err)
				}
				return
			}
			e, ok := AsError(err)
			if !ok || e.Status != tc.status {
				t.Fatalf("got %v, want status %d", err, tc.status)
			}
		})
	}
	// Without credentials configured the header alone decides.
	open := NewResolver(DefaultOptions())
	q := httptest.NewRequest(http.MethodGet, "/", nil)
	q.Header.Set(DefaultHeader, "x")
	if got, err := open.Resolve(q, true); err != nil || got.ID != "x" {
		t.Errorf("open resolver: %+v %v", got, err)
	}
}

func TestRateAndQueryLimits(t *testing.T) {
	c, _ := ParseConfig([]byte("limits:\n  records_per_second: 10\n  max_concurrent_queries: 2\n"))
	now := time.Unix(1000, 0)
	r := NewResolver(Options{Config: c, Now: func() time.Time { return now }})
	a := r.Tenant("a")
	if err := a.AllowRecords(10); err != nil {
		t.Fatal(err)
	}
	err := a.AllowRecords(5)
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrLimited) || le.Limit != "records_per_second" {
		t.Fatalf("over rate: %v", err)
	}
	// 5 records at 10/s need half a second: Retry-After rounds up to 1.
	if le.RetryAfter != 500*time.Millisecond || le.RetryAfterSeconds() != 1 {
		t.Errorf("retry after %v (%ds), want 500ms (1s)", le.RetryAfter, le.RetryAfterSeconds())
	}
	if err := a.AllowRecords(11); !errors.As(err, &le) || !strings.Contains(le.Detail, "burst of 10") {
		t.Errorf("over the burst: %v", err)
	}
	now = now.Add(time.Second)
	if err := a.AllowRecords(10); err != nil {
		t.Errorf("after a second: %v", err)
	}
	// The same tenant resolved again shares the limits.
	r1, err1 := a.AcquireQuery()
	r2, err2 := r.Tenant("a").AcquireQuery()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, err := a.AcquireQuery(); !errors.As(err, &le) || le.Limit != "max_concurrent_queries" || le.Value != 2 {
		t.Errorf("third query: %v", err)
	}
	if rb, err := r.Tenant("b").AcquireQuery(); err != nil {
		t.Errorf("b is unaffected: %v", err)
	} else {
		rb()
	}
	r1()
	if r3, err := a.AcquireQuery(); err != nil {
		t.Errorf("after a release: %v", err)
	} else {
		r3()
	}
	r2()
}

func TestActiveSeriesExpire(t *testing.T) {
	c, _ := ParseConfig([]byte("limits:\n  max_active_series: 1\n"))
	now := time.Unix(1000, 0)
	r := NewResolver(Options{Config: c, Now: func() time.Time { return now }})
	a := r.Tenant("a")
	b := a.Series()
	if err := b.Add(1); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(1); err != nil { // the same series again
		t.Fatal(err)
	}
	b.Commit()
	b = a.Series()
	if err := b.Add(2); err == nil {
		t.Fatal("second series admitted")
	}
	b.Rollback()
	now = now.Add(ActiveSeriesWindow + time.Second)
	b = a.Series()
	if err := b.Add(2); err != nil {
		t.Errorf("after the first went idle: %v", err)
	}
	// A rolled-back reservation is given back.
	b.Rollback()
	b = a.Series()
	if err := b.Add(3); err != nil {
		t.Errorf("after rollback: %v", err)
	}
}
