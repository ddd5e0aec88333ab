package tenant

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Config is the tenancy configuration file (--tenancy.config.file):
// who may act for which tenant, and the limits of each.
//
//	users:                       # HTTP basic auth
//	  - username: alice
//	    password_hash: $2y$10$…  # bcrypt, as in Prometheus' web config
//	    tenants: [team-a]        # read and write
//	    read: [team-b]           # read only
//	tokens:                      # Authorization: Bearer <token>
//	  - token_file: /etc/tailroot/agent.token
//	    write: [team-a]          # write only
//	limits:                      # every tenant, unless overridden
//	  max_active_series: 150000
//	  samples_per_second: 100000
//	overrides:
//	  team-a:
//	    max_active_series: 1000000
//
// With no users and no tokens, any valid tenant in the header is accepted
// (the header is trusted, as Cortex and Mimir trust it behind their
// gateway). With either, every request must authenticate, and may only
// name a tenant its credentials list for the access it makes.
type Config struct {
	Users  []User  `yaml:"users"`
	Tokens []Token `yaml:"tokens"`
	Limits Limits  `yaml:"limits"`
	// Overrides are per-tenant limits; a key an override leaves out keeps
	// the value of Limits.
	Overrides map[string]yaml.Node `yaml:"overrides"`
	overrides map[string]Limits
}

// Grants lists the tenants a credential may act for: Tenants for reads
// and writes, Read for reads only, Write for writes only. "*" is every
// tenant.
type Grants struct {
	Tenants []string `yaml:"tenants"`
	Read    []string `yaml:"read"`
	Write   []string `yaml:"write"`
}

// User is a basic-auth user.
type User struct {
	Username     string `yaml:"username"`
	PasswordHash string `yaml:"password_hash"`
	Grants       `yaml:",inline"`
}

// Token is a bearer token, given inline or read from a file (the file's
// content, surrounding space trimmed).
type Token struct {
	Token     string `yaml:"token"`
	TokenFile string `yaml:"token_file"`
	Grants    `yaml:",inline"`
}

// Limits are the per-tenant limits. Zero means no limit.
type Limits struct {
	// MaxActiveSeries is the most series a tenant may have written to in
	// the last ActiveSeriesWindow; a write that would add one more is
	// refused.
	MaxActiveSeries int `yaml:"max_active_series"`
	// SamplesPerSecond is the sustained rate of float and histogram
	// samples a tenant may write, with SamplesBurst samples at once; a zero
	// burst means one second's worth. A write is admitted or refused whole.
	SamplesPerSecond float64 `yaml:"samples_per_second"`
	SamplesBurst     int     `yaml:"samples_burst"`
	// RecordsPerSecond and RecordsBurst bound request records (NDJSON and
	// OTLP spans) the same way.
	RecordsPerSecond float64 `yaml:"records_per_second"`
	RecordsBurst     int     `yaml:"records_burst"`
	// MaxConcurrentQueries is the most read requests (queries, series,
	// labels, records, attribution, …) a tenant may have in flight; one
	// more is refused at once rather than queued, so one tenant cannot
	// hold the server's query slots (--query.max-concurrency) for others.
	MaxConcurrentQueries int `yaml:"max_concurrent_queries"`
}

// set is the tenants a credential lists for one kind of access.
type set []string

func (s set) has(id string) bool { return slices.Contains(s, "*") || slices.Contains(s, id) }

// LoadConfig reads and checks a tenancy configuration file.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tenancy config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("tenancy config %s: %w", path, err)
	}
	for i := range c.Tokens {
		t := &c.Tokens[i]
		if t.TokenFile == "" {
			continue
		}
		b, err := os.ReadFile(t.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("tenancy config %s: tokens[%d]: %w", path, i, err)
		}
		t.Token = strings.TrimSpace(string(b))
		if t.Token == "" {
			return nil, fmt.Errorf("tenancy config %s: tokens[%d]: token_file %s is empty", path, i, t.TokenFile)
		}
	}
	return c, nil
}

// ParseConfig parses a tenancy configuration; unknown keys are errors, so
// a misspelt limit is not silently no limit. A token_file is not read.
func ParseConfig(b []byte) (*Config, error) {
	c := &Config{}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	// An empty file is an empty configuration.
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	seen := map[string]bool{}
	for i, u := range c.Users {
		if u.Username == "" || u.PasswordHash == "" {
			return nil, fmt.Errorf("users[%d]: username and password_hash are required", i)
		}
		if seen[u.Username] {
			return nil, fmt.Errorf("users[%d]: user %q listed twice", i, u.Username)
		}
		seen[u.Username] = true
		if err := u.Grants.check(); err != nil {
			return nil, fmt.Errorf("users[%d] (%s): %w", i, u.Username, err)
		}
	}
	for i, t := range c.Tokens {
		if (t.Token == "") == (t.TokenFile == "") {
			return nil, fmt.Errorf("tokens[%d]: exactly one of token and token_file is required", i)
		}
		if err := t.Grants.check(); err != nil {
			return nil, fmt.Errorf("tokens[%d]: %w", i, err)
		}
	}
	if err := c.Limits.check(); err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	c.overrides = make(map[string]Limits, len(c.Overrides))
	for id, n := range c.Overrides {
		if err := ValidateID(id); err != nil {
			return nil, fmt.Errorf("overrides: %w", err)
		}
		l := c.Limits
		if err := n.Decode(&l); err != nil {
			return nil, fmt.Errorf("overrides %s: %w", id, err)
		}
		c.overrides[id] = l
		if err := l.check(); err != nil {
			return nil, fmt.Errorf("overrides %s: %w", id, err)
		}
	}
	return c, nil
}

func (g Grants) check() error {
	if len(g.Tenants)+len(g.Read)+len(g.Write) == 0 {
		return errors.New("grants no tenant: list tenants, read or write")
	}
	for _, l := range [][]string{g.Tenants, g.Read, g.Write} {
		for _, id := range l {
			if id == "*" {
				continue
			}
			if err := ValidateID(id); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g Grants) allows(id string, write bool) bool {
	if set(g.Tenants).has(id) {
		return true
	}
	if write {
		return set(g.Write).has(id)
	}
	return set(g.Read).has(id)
}

func (l Limits) check() error {
	switch {
	case l.MaxActiveSeries < 0:
		return fmt.Errorf("max_active_series %d is negative", l.MaxActiveSeries)
	case l.SamplesPerSecond < 0:
		return fmt.Errorf("samples_per_second %g is negative", l.SamplesPerSecond)
	case l.SamplesBurst < 0:
		return fmt.Errorf("samples_burst %d is negative", l.SamplesBurst)
	case l.RecordsPerSecond < 0:
		return fmt.Errorf("records_per_second %g is negative", l.RecordsPerSecond)
	case l.RecordsBurst < 0:
		return fmt.Errorf("records_burst %d is negative", l.RecordsBurst)
	case l.MaxConcurrentQueries < 0:
		return fmt.Errorf("max_concurrent_queries %d is negative", l.MaxConcurrentQueries)
	}
	return nil
}

// For returns the limits of tenant id: its override, else the defaults.
func (c *Config) For(id string) Limits {
	if l, ok := c.overrides[id]; ok {
		return l
	}
	return c.Limits
}
