package remote

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tailroot/tailroot/query/remote/storepb"
)

// selfSigned returns a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "store"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

func TestStoreAPITLS(t *testing.T) {
	cert, pool := selfSigned(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	storepb.RegisterStoreServer(srv, &fakeStore{})
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	for name, c := range map[string]struct {
		tls    *tls.Config
		wantOK bool
	}{
		"trusted":   {&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, true},
		"untrusted": {&tls.Config{MinVersion: tls.VersionTLS12}, false},
		"plaintext": {nil, false},
	} {
		s, err := NewStoreAPI(StoreAPIOptions{Address: ln.Addr().String(), TLS: c.tls, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		q, _ := s.Querier(0, 1)
		_, _, err = q.LabelNames(context.Background(), nil)
		if (err == nil) != c.wantOK {
			t.Errorf("%s: err %v, want ok %v", name, err, c.wantOK)
		}
		_ = s.Close()
	}
}
