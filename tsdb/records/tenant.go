package records

import (
	"context"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/internal/tenant"
)

// Selecter is what reads records: a Store, or a source built over one
// (Parquet history, peers).
type Selecter interface {
	Select(ctx context.Context, mint, maxt int64, ms ...*labels.Matcher) RecordIterator
}

// ColumnSelecter is a Selecter that also reads columns (Store.SelectColumns).
type ColumnSelecter interface {
	Selecter
	SelectColumns(ctx context.Context, mint, maxt int64, want Columns, ms ...*labels.Matcher) (*ColumnBatch, error)
}

// TenantSource confines src to the tenant of each call's context, as
// tsdb.TenantQueryable confines series: records of a tenant carry its
// label (ingest stamps it), every selection gets the tenant's matchers
// (tenant.Tenant.Matchers) and the label is stripped from what comes back.
// A context without a tenant reads src unchanged: the rule evaluator's
// tailroot functions, and every caller when tenancy is off; with tenancy on
// every HTTP request carries a tenant. The result implements
// ColumnSelecter when src does.
func TenantSource(src Selecter) Selecter {
	if cs, ok := src.(ColumnSelecter); ok {
		return tenantColumns{tenantSource{cs}, cs}
	}
	return tenantSource{src}
}

type tenantSource struct{ src Selecter }

func (s tenantSource) Select(ctx context.Context, mint, maxt int64, ms ...*labels.Matcher) RecordIterator {
	t := tenant.FromContext(ctx)
	if t == nil {
		return s.src.Select(ctx, mint, maxt, ms...)
	}
	ms, ok := t.Matchers(ms)
	if !ok {
		return emptyIterator{}
	}
	return &strippedIterator{it: s.src.Select(ctx, mint, maxt, ms...), t: t}
}

type tenantColumns struct {
	tenantSource
	cs ColumnSelecter
}

func (s tenantColumns) SelectColumns(ctx context.Context, mint, maxt int64, want Columns, ms ...*labels.Matcher) (*ColumnBatch, error) {
	t := tenant.FromContext(ctx)
	if t == nil {
		return s.cs.SelectColumns(ctx, mint, maxt, want, ms...)
	}
	ms, ok := t.Matchers(ms)
	if !ok {
		return s.cs.SelectColumns(ctx, 1, 0, want) // an empty batch with the columns asked for
	}
	b, err := s.cs.SelectColumns(ctx, mint, maxt, want, ms...)
	if err != nil {
		return nil, err
	}
	// Every label set holds the same tenant label, so stripping it keeps
	// them distinct.
	for i, ls := range b.LabelSets {
		b.LabelSets[i] = t.Strip(ls)
	}
	return b, nil
}

type strippedIterator struct {
	it RecordIterator
	t  *tenant.Tenant
}

func (s *strippedIterator) Next() bool { return s.it.Next() }
func (s *strippedIterator) At() Record {
	r := s.it.At()
	r.Labels = s.t.Strip(r.Labels)
	return r
}
func (s *strippedIterator) Err() error   { return s.it.Err() }
func (s *strippedIterator) Close() error { return s.it.Close() }

type emptyIterator struct{}

func (emptyIterator) Next() bool   { return false }
func (emptyIterator) At() Record   { return Record{} }
func (emptyIterator) Err() error   { return nil }
func (emptyIterator) Close() error { return nil }
