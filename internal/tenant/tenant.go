package tenant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

// DefaultHeader is the request header naming the tenant, the one Cortex,
// Mimir, Loki, Tempo and Thanos Receive read.
const DefaultHeader = "X-Scope-OrgID"

// DefaultLabel is the label every series and request record of a tenant
// carries. Thanos Receive names its tenant label tenant_id, so blocks a
// Thanos sidecar uploads from tailroot look like Receive's to Thanos Query
// and Compact, and Receive's --receive.split-tenant-label-name splits
// forwarded writes by it.
const DefaultLabel = "tenant_id"

// MaxIDLength is the longest tenant ID accepted, Cortex's limit.
const MaxIDLength = 150

// Tenant is the tenant a request acts for, with the label its data is
// stored under and its limits. Build one with a Resolver.
type Tenant struct {
	// ID is the tenant's name, the value of Label on its data.
	ID string
	// Label is the label name the tenant's data carries.
	Label string
	// Header is the request header that named the tenant; calls made on
	// the tenant's behalf to other tailroot servers (distributed tail
	// rounds) send it.
	Header string
	lim    *limiter
}

type ctxKey struct{}

// NewContext returns ctx carrying t.
func NewContext(ctx context.Context, t *Tenant) context.Context {
	return context.WithValue(ctx, ctxKey{}, t)
}

// FromContext returns the tenant ctx carries, or nil when it carries none
// (tenancy off, or an internal caller such as the rule evaluator).
func FromContext(ctx context.Context) *Tenant {
	t, _ := ctx.Value(ctxKey{}).(*Tenant)
	return t
}

// ValidateID checks a tenant ID as Cortex and Mimir do: 1 to 150 bytes of
// letters, digits and !-_.*'(), not "." or "..". The ID becomes a label
// value and a directory name (evidence), so nothing else is allowed.
func ValidateID(id string) error {
	if id == "" {
		return errors.New("tenant ID is empty")
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("tenant ID of %d bytes is over the limit of %d", len(id), MaxIDLength)
	}
	if id == "." || id == ".." {
		return fmt.Errorf("tenant ID %q is not allowed", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '!', c == '-', c == '_', c == '.', c == '*', c == '\'', c == '(', c == ')':
		default:
			return fmt.Errorf("tenant ID %q: character %q is not allowed (letters, digits and !-_.*'() are)", id, c)
		}
	}
	return nil
}

// ErrLimited is what every *LimitError is: a per-tenant limit refused the
// request, which a client may retry after LimitError.RetryAfter.
var ErrLimited = errors.New("per-tenant limit reached")

// LimitError says which per-tenant limit refused a request.
type LimitError struct {
	Tenant string
	// Limit is the configuration key of the limit (max_active_series, …).
	Limit string
	// Value is the limit in force.
	Value float64
	// Detail says what the request would have made of it.
	Detail string
	// RetryAfter is how long to wait before retrying; at least a second.
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	msg := fmt.Sprintf("tenant %q: per-tenant limit %s=%g reached", e.Tenant, e.Limit, e.Value)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Is makes errors.Is(err, ErrLimited) hold.
func (e *LimitError) Is(target error) bool { return target == ErrLimited }

// RetryAfterSeconds is the Retry-After header value for e: whole seconds,
// rounded up, at least 1.
func (e *LimitError) RetryAfterSeconds() int {
	s := int((e.RetryAfter + time.Second - 1) / time.Second)
	return max(s, 1)
}

// Matchers returns ms confined to t, for a store whose every series or
// record of t carries Label=ID: the selector's own matchers on Label are
// judged against the view t is shown, where the label does not exist, so
// one that matches the empty value (tenant_id="", tenant_id=~".*",
// tenant_id!="B") is dropped and any other (tenant_id="B",
// tenant_id=~".+") makes ok false: the selection is empty. Label=ID is
// always added, so no matcher can widen it.
func (t *Tenant) Matchers(ms []*labels.Matcher) (out []*labels.Matcher, ok bool) {
	out = make([]*labels.Matcher, 0, len(ms)+1)
	for _, m := range ms {
		if m.Name == t.Label {
			if !m.Matches("") {
				return nil, false
			}
			continue
		}
		out = append(out, m)
	}
	return append(out, labels.MustNewMatcher(labels.MatchEqual, t.Label, t.ID)), true
}

// Strip returns ls without t's label; ls itself when it has none.
func (t *Tenant) Strip(ls labels.Labels) labels.Labels {
	if !ls.Has(t.Label) {
		return ls
	}
	return labels.NewBuilder(ls).Del(t.Label).Labels()
}

// Stamp returns ls with t's label set to t's ID, whatever value it had.
func (t *Tenant) Stamp(ls labels.Labels) labels.Labels {
	return labels.NewBuilder(ls).Set(t.Label, t.ID).Labels()
}
