package tenant

import (
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// FuzzParseConfig feeds arbitrary YAML to the tenancy configuration
// parser: it returns a configuration or an error, never panics, and a
// configuration it accepts has only valid tenant IDs and non-negative
// limits.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("users:\n  - username: a\n    password_hash: x\n    tenants: [t]\nlimits:\n  max_active_series: 5\noverrides:\n  t:\n    samples_per_second: 1\n"))
	f.Add([]byte("tokens:\n  - token: s\n    write: ['*']\n"))
	f.Add([]byte("overrides:\n  ..: {}\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		for id := range c.Overrides {
			if ValidateID(id) != nil {
				t.Fatalf("accepted override for invalid tenant %q", id)
			}
			if err := c.For(id).check(); err != nil {
				t.Fatalf("accepted override %q: %v", id, err)
			}
		}
		if err := c.Limits.check(); err != nil {
			t.Fatalf("accepted limits: %v", err)
		}
	})
}

// FuzzMatchers checks the confinement rule on arbitrary matchers of the
// tenant label: the result always holds the enforced matcher and no other
// matcher on the label, and it selects nothing exactly when the tenant's
// view (where the label is absent) cannot match.
func FuzzMatchers(f *testing.F) {
	f.Add(uint8(labels.MatchEqual), "B", "job", "x")
	f.Add(uint8(labels.MatchRegexp), ".*", "tenant_id", "A")
	f.Add(uint8(labels.MatchNotEqual), "", "__name__", "m")
	f.Add(uint8(labels.MatchNotRegexp), ".+", "tenant_id", "")
	r := NewResolver(DefaultOptions())
	f.Fuzz(func(t *testing.T, typ uint8, value, otherName, otherValue string) {
		m, err := labels.NewMatcher(labels.MatchType(typ%4), DefaultLabel, value)
		if err != nil {
			return
		}
		other, err := labels.NewMatcher(labels.MatchEqual, otherName, otherValue)
		if err != nil {
			return
		}
		tn := r.Tenant("A")
		out, ok := tn.Matchers([]*labels.Matcher{other, m})
		if ok != m.Matches("") && otherName != DefaultLabel {
			t.Fatalf("%s: ok=%v, but it matches the empty value: %v", m, ok, m.Matches(""))
		}
		if !ok {
			return
		}
		enforced := 0
		for _, o := range out {
			if o.Name != DefaultLabel {
				continue
			}
			if o.Type != labels.MatchEqual || o.Value != "A" {
				t.Fatalf("a matcher on the tenant label survived: %s", o)
			}
			enforced++
		}
		if enforced != 1 {
			t.Fatalf("%d enforced matchers in %v", enforced, out)
		}
	})
}
