package main

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/internal/tenant"
	"github.com/tailroot/tailroot/query/tailfn"
	"github.com/tailroot/tailroot/tsdb"
	"github.com/tailroot/tailroot/tsdb/evidence"
	"github.com/tailroot/tailroot/tsdb/records"
)

// tenancyConfig is multi-tenancy (docs/tenancy.md): off by default, when
// nothing below changes what the server does.
type tenancyConfig struct {
	enabled        bool
	header, label  string
	configFile     string
	resolver       *tenant.Resolver
	evidenceMu     sync.Mutex
	evidenceStores map[string]*evidence.Store
	evidenceBase   evidence.Options
	evidenceClosed bool
}

func addTenancyFlags(fs *flag.FlagSet, c *serveConfig) {
	t := &c.tenancy
	fs.BoolVar(&t.enabled, "tenancy.enabled", false, "require a tenant on every request (--tenancy.header) and confine every read, write, record, evidence item and report to it; see docs/tenancy.md")
	fs.StringVar(&t.header, "tenancy.header", tenant.DefaultHeader, "request header naming the tenant")
	fs.StringVar(&t.label, "tenancy.label", tenant.DefaultLabel, "label every series and request record of a tenant is stored under (stripped from what the tenant reads)")
	fs.StringVar(&t.configFile, "tenancy.config.file", "", "YAML file of basic-auth users and bearer tokens with the tenants they may read and write, and per-tenant limits; empty trusts the header and sets no limits")
}

// resolveTenancy checks the tenancy flags once parsed and builds the
// resolver; derived series get the tenant label so they stay the tenant's.
func (c *serveConfig) resolveTenancy() error {
	t := &c.tenancy
	if !t.enabled {
		if t.configFile != "" {
			return errors.New("--tenancy.config.file is set but --tenancy.enabled is not")
		}
		return nil
	}
	if t.header == "" {
		return errors.New("--tenancy.header is empty")
	}
	if err := validLabelName(t.label); err != nil {
		return fmt.Errorf("--tenancy.label: %w", err)
	}
	o := tenant.DefaultOptions()
	o.Header, o.Label = t.header, t.label
	if t.configFile != "" {
		cfg, err := tenant.LoadConfig(t.configFile)
		if err != nil {
			return err
		}
		o.Config = cfg
	}
	t.resolver = tenant.NewResolver(o)
	if !slices.Contains(c.records.SeriesLabels, t.label) {
		c.records.SeriesLabels = append(c.records.SeriesLabels, t.label)
	}
	return nil
}

func validLabelName(n string) error {
	if n == "" || strings.HasPrefix(n, "__") {
		return fmt.Errorf("label name %q is not allowed (names starting with __ are reserved)", n)
	}
	for i, r := range n {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return fmt.Errorf("label name %q: want [a-zA-Z_][a-zA-Z0-9_]*", n)
		}
	}
	return nil
}

// appendable is what the ingest handlers write to: the TSDB, stamping
// each request's tenant with tenancy on.
func (t *tenancyConfig) appendable(db *tsdb.DB) storage.AppendableV2 {
	if !t.enabled {
		return db
	}
	return tsdb.TenantAppendable(db)
}

// queryable is what the attribution handlers read series from.
func (t *tenancyConfig) queryable(q storage.Queryable) storage.Queryable {
	if !t.enabled {
		return q
	}
	return tsdb.TenantQueryable(q)
}

// columns is what record functions, reports and the records shard read.
func (t *tenancyConfig) columns(src tailfn.ColumnSource) tailfn.ColumnSource {
	if !t.enabled {
		return src
	}
	return records.TenantSource(src).(records.ColumnSelecter)
}

// evidenceStore opens (once) the evidence store of tenant id, in a folder
// of its own under the evidence directory.
func (t *tenancyConfig) evidenceStore(id string) (*evidence.Store, error) {
	t.evidenceMu.Lock()
	defer t.evidenceMu.Unlock()
	if t.evidenceClosed {
		return nil, evidence.ErrClosed
	}
	if s, ok := t.evidenceStores[id]; ok {
		return s, nil
	}
	o := t.evidenceBase
	o.Dir = filepath.Join(o.Dir, "tenants", id)
	s, err := evidence.Open(o)
	if err != nil {
		return nil, fmt.Errorf("evidence store of tenant %q: %w", id, err)
	}
	if t.evidenceStores == nil {
		t.evidenceStores = map[string]*evidence.Store{}
	}
	t.evidenceStores[id] = s
	return s, nil
}

// tenantEvidence gives the evidence handlers a store per tenant (nil with
// tenancy off); the returned function closes them.
func (t *tenancyConfig) tenantEvidence(base evidence.Options) (func(string) (*evidence.Store, error), func() error) {
	if !t.enabled {
		return nil, func() error { return nil }
	}
	t.evidenceBase = base
	return t.evidenceStore, func() error {
		t.evidenceMu.Lock()
		defer t.evidenceMu.Unlock()
		t.evidenceClosed = true
		var errs []error
		for _, s := range t.evidenceStores {
			errs = append(errs, s.Close())
		}
		return errors.Join(errs...)
	}
}
