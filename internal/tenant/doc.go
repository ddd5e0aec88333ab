// Package tenant resolves who a request is for and what it may do when
// tailroot runs multi-tenant (serve --tenancy.enabled): the tenant named by
// the tenant header (X-Scope-OrgID by default, as Cortex, Mimir, Loki and
// Thanos name it), checked against the basic-auth users and bearer tokens
// of the tenancy configuration file, and the per-tenant limits (active
// series, samples/s, request records/s, concurrent queries).
//
// In: an *http.Request and a Config. Out: a *Tenant carried in the
// request's context (NewContext, FromContext), which the storage wrappers
// (tsdb.TenantQueryable, tsdb.TenantAppendable, records.TenantSource) and
// the ingest paths read to confine every read and stamp every write.
//
// Invariants: a Tenant is only ever built by a Resolver, so an ID in a
// context has been validated and, when the configuration names users or
// tokens, authorised for the kind of access the request makes. Limits
// refuse with *LimitError, which names the limit and its value and says
// how long to wait (Retry-After); errors.Is(err, ErrLimited) holds for it.
// The package has no flags: cmd/tailroot reads them into Options.
package tenant
