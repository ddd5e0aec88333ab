package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/tailroot/tailroot/internal/tenant"
)

// importAuth is who `tailroot import` writes as, for a server with
// --tenancy.enabled (docs/tenancy.md): the tenant header and credentials
// sent with every request.
type importAuth struct {
	tenant, header        string
	user, passwordFile    string
	bearerTokenFile       string
	password, bearerToken string
}

func addImportAuthFlags(fs *flag.FlagSet) *importAuth {
	a := &importAuth{}
	fs.StringVar(&a.tenant, "tenant", "", "tenant to write as (sent in --tenant.header); empty sends none")
	fs.StringVar(&a.header, "tenant.header", tenant.DefaultHeader, "request header naming the tenant")
	fs.StringVar(&a.user, "basic-auth.username", "", "basic-auth user name")
	fs.StringVar(&a.passwordFile, "basic-auth.password-file", "", "file holding the basic-auth password")
	fs.StringVar(&a.bearerTokenFile, "bearer-token-file", "", "file holding a bearer token")
	return a
}

// apply reads the secret files and makes c send the header and
// credentials.
func (a *importAuth) apply(c *http.Client) error {
	read := func(flagName, path string) (string, error) {
		if path == "" {
			return "", nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("--%s: %w", flagName, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	var err error
	if a.password, err = read("basic-auth.password-file", a.passwordFile); err != nil {
		return err
	}
	if a.bearerToken, err = read("bearer-token-file", a.bearerTokenFile); err != nil {
		return err
	}
	if a.user != "" && a.bearerToken != "" {
		return fmt.Errorf("--basic-auth.username and --bearer-token-file are exclusive")
	}
	if a.tenant != "" {
		if err := tenant.ValidateID(a.tenant); err != nil {
			return fmt.Errorf("--tenant: %w", err)
		}
	}
	if a.tenant == "" && a.user == "" && a.bearerToken == "" {
		return nil
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = authTransport{base: base, a: a}
	return nil
}

type authTransport struct {
	base http.RoundTripper
	a    *importAuth
}

func (t authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if t.a.tenant != "" {
		r.Header.Set(t.a.header, t.a.tenant)
	}
	switch {
	case t.a.user != "":
		r.SetBasicAuth(t.a.user, t.a.password)
	case t.a.bearerToken != "":
		r.Header.Set("Authorization", "Bearer "+t.a.bearerToken)
	}
	return t.base.RoundTrip(r)
}
