package config

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerHTTPClient pushes to a TLS server whose certificate is signed
// by no public CA: refused without tls_config, accepted with its CA file
// (and a bearer token file, which reaches the server), and with
// insecure_skip_verify.
func TestServerHTTPClient(t *testing.T) {
	var gotAuth string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	push := func(yml string) error {
		t.Helper()
		path := filepath.Join(dir, "agent.yaml")
		if err := os.WriteFile(path, []byte("server:\n  url: "+srv.URL+"\n"+yml), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		hc, err := c.Server.HTTPClient()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Post(srv.URL+"/api/v1/write", "application/x-protobuf", strings.NewReader("x"))
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := push(""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("push to a private-CA server without its CA: %v", err)
	}
	// A relative ca_file is relative to the configuration file.
	if err := push("  tls_config:\n    ca_file: ca.pem\n    server_name: example.com\n  authorization:\n    credentials_file: token\n"); err != nil {
		t.Fatalf("with the CA file: %v", err)
	}
	if gotAuth != "Bearer s3cret" {
		t.Fatalf("Authorization %q, want the bearer token from the file", gotAuth)
	}
	if err := push("  tls_config:\n    insecure_skip_verify: true\n"); err != nil {
		t.Fatalf("with insecure_skip_verify: %v", err)
	}
	if _, err := Parse([]byte("server:\n  username: u\n  basic_auth:\n    username: v\n")); err == nil {
		t.Fatal("username and basic_auth both accepted")
	}
	if _, err := Parse([]byte("server:\n  tls_config:\n    cert_file: only-the-cert.pem\n")); err == nil {
		t.Fatal("a client cert without its key accepted")
	}
}
