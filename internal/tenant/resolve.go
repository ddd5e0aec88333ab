package tenant

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Options configures a Resolver.
type Options struct {
	// Header names the tenant; empty means DefaultHeader.
	Header string
	// Label is the label name tenant data carries; empty means
	// DefaultLabel.
	Label string
	// Config holds credentials and limits; nil means no credentials (the
	// header is trusted) and no limits.
	Config *Config
	// Now is the clock of the rate limits; nil means time.Now.
	Now func() time.Time
}

// DefaultOptions returns the defaults: X-Scope-OrgID, tenant_id, no
// credentials, no limits.
func DefaultOptions() Options {
	return Options{Header: DefaultHeader, Label: DefaultLabel}
}

// Resolver turns requests into tenants. It is safe for concurrent use.
type Resolver struct {
	opts Options
	auth bool

	mu   sync.Mutex
	lims map[string]*limiter
	// good caches the SHA-256 of basic-auth credentials bcrypt accepted,
	// so a remote-write sender does not pay a bcrypt per request (as the
	// exporter-toolkit does for the web config).
	good map[[sha256.Size]byte]bool
}

// maxCachedCredentials bounds Resolver.good; the cache is emptied when full.
const maxCachedCredentials = 1024

// NewResolver builds a resolver.
func NewResolver(o Options) *Resolver {
	if o.Header == "" {
		o.Header = DefaultHeader
	}
	if o.Label == "" {
		o.Label = DefaultLabel
	}
	if o.Config == nil {
		o.Config = &Config{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Resolver{
		opts: o,
		auth: len(o.Config.Users)+len(o.Config.Tokens) > 0,
		lims: map[string]*limiter{},
		good: map[[sha256.Size]byte]bool{},
	}
}

// Header is the tenant header the resolver reads.
func (r *Resolver) Header() string { return r.opts.Header }

// Label is the label tenant data is stored under.
func (r *Resolver) Label() string { return r.opts.Label }

// Error is a request the resolver refused: Status is 401 (no or wrong
// credentials, no tenant header), 400 (a malformed tenant ID) or 403 (the
// credentials do not grant the tenant).
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Resolve returns the tenant req acts for; write says whether req writes
// (ingest, deletes) or reads.
func (r *Resolver) Resolve(req *http.Request, write bool) (*Tenant, error) {
	var grants *Grants
	var who string
	if r.auth {
		g, name, err := r.authenticate(req)
		if err != nil {
			return nil, err
		}
		grants, who = g, name
	}
	id := strings.TrimSpace(req.Header.Get(r.opts.Header))
	if id == "" {
		return nil, &Error{Status: http.StatusUnauthorized, Msg: fmt.Sprintf("no tenant: the %s header is required", r.opts.Header)}
	}
	if err := ValidateID(id); err != nil {
		return nil, &Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf("%s header: %v", r.opts.Header, err)}
	}
	if grants != nil && !grants.allows(id, write) {
		access := "read"
		if write {
			access = "write"
		}
		return nil, &Error{Status: http.StatusForbidden, Msg: fmt.Sprintf("%s may not %s tenant %q", who, access, id)}
	}
	return r.Tenant(id), nil
}

// Tenant returns the tenant id with its limits, without any check: for
// tests and for callers that resolved the tenant another way.
func (r *Resolver) Tenant(id string) *Tenant {
	r.mu.Lock()
	lim, ok := r.lims[id]
	if !ok {
		lim = newLimiter(id, r.opts.Config.For(id), r.opts.Now)
		r.lims[id] = lim
	}
	r.mu.Unlock()
	return &Tenant{ID: id, Label: r.opts.Label, Header: r.opts.Header, lim: lim}
}

var errNoCredentials = &Error{Status: http.StatusUnauthorized, Msg: "authentication required: send basic-auth credentials or a bearer token of the tenancy configuration"}

func (r *Resolver) authenticate(req *http.Request) (*Grants, string, error) {
	authz := req.Header.Get("Authorization")
	if tok, ok := strings.CutPrefix(authz, "Bearer "); ok {
		tok = strings.TrimSpace(tok)
		for i := range r.opts.Config.Tokens {
			t := &r.opts.Config.Tokens[i]
			if subtle.ConstantTimeCompare([]byte(t.Token), []byte(tok)) == 1 {
				return &t.Grants, fmt.Sprintf("token %d", i), nil
			}
		}
		return nil, "", &Error{Status: http.StatusUnauthorized, Msg: "bearer token not accepted"}
	}
	user, pass, ok := req.BasicAuth()
	if !ok {
		return nil, "", errNoCredentials
	}
	for i := range r.opts.Config.Users {
		u := &r.opts.Config.Users[i]
		if u.Username != user {
			continue
		}
		if r.checkPassword(u, pass) {
			return &u.Grants, fmt.Sprintf("user %q", user), nil
		}
		break
	}
	return nil, "", &Error{Status: http.StatusUnauthorized, Msg: "basic-auth credentials not accepted"}
}

func (r *Resolver) checkPassword(u *User, pass string) bool {
	key := sha256.Sum256([]byte(u.Username + "\x00" + u.PasswordHash + "\x00" + pass))
	r.mu.Lock()
	ok := r.good[key]
	r.mu.Unlock()
	if ok {
		return true
	}
	if err := bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(pass)); err != nil {
		return false
	}
	r.mu.Lock()
	if len(r.good) >= maxCachedCredentials {
		clear(r.good)
	}
	r.good[key] = true
	r.mu.Unlock()
	return true
}

// AsError returns err as a resolver *Error when it is one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
