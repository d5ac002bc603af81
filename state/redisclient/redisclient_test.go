package redisclient_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/state/redisclient"
)

func init() { redis.SetLogger(redisclient.Logger(func(string, ...any) {})) }

func TestModeAndValidate(t *testing.T) {
	for _, tc := range []struct {
		o    redisclient.Options
		mode string
		ok   bool
	}{
		{redisclient.Options{}, "standalone", true},
		{redisclient.Options{Addresses: []string{"a:1", "b:2"}}, "cluster", true},
		{redisclient.Options{Addresses: []string{"cfg:6379"}, Cluster: true}, "cluster", true},
		{redisclient.Options{Addresses: []string{"s1:26379", "s2:26379"}, MasterName: "m"}, "sentinel", true},
		{redisclient.Options{Addresses: []string{"a:1", "b:2"}, DB: 1}, "cluster", false},
		{redisclient.Options{Addresses: []string{"nohost"}}, "standalone", false},
		{redisclient.Options{MasterName: "m", Cluster: true}, "sentinel", false},
		{redisclient.Options{TLS: &redisclient.TLS{ClientKey: "k.pem"}}, "standalone", false},
	} {
		if got := tc.o.Mode(); got != tc.mode {
			t.Errorf("%+v: mode %s, want %s", tc.o, got, tc.mode)
		}
		if err := tc.o.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate = %v", tc.o, err)
		}
	}
}

func TestSecretsStayOut(t *testing.T) {
	o := redisclient.Options{Addresses: []string{"r:6379"}, Username: "u", Password: "hunter2", SentinelPassword: "s3nt"}
	if s := o.String(); strings.Contains(s, "hunter2") || strings.Contains(s, "s3nt") || !strings.Contains(s, "[REDACTED]") {
		t.Errorf("String() = %q", s)
	}
	if k := o.Key(); strings.Contains(k, "hunter2") || strings.Contains(k, "s3nt") {
		t.Errorf("Key() = %q holds a secret", k)
	}
	other := o
	other.Password = "another"
	if o.Key() == other.Key() {
		t.Error("different passwords share a client key")
	}
}

func TestDurationJSON(t *testing.T) {
	var o redisclient.Options
	if err := json.Unmarshal([]byte(`{"timeout":"1.5s","dial_timeout":2000000000}`), &o); err != nil {
		t.Fatal(err)
	}
	if time.Duration(o.Timeout) != 1500*time.Millisecond || time.Duration(o.DialTimeout) != 2*time.Second {
		t.Fatalf("%v %v", o.Timeout, o.DialTimeout)
	}
	if err := json.Unmarshal([]byte(`{"timeout":"soon"}`), &o); err == nil {
		t.Fatal("a bad duration was accepted")
	}
}

// TLS to a real redis-server with a certificate from a test CA: trusted
// through ca_cert it connects; with the system roots it is refused.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeCerts(t, dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	redistest.Start(t, redistest.Options{Config: []string{
		"tls-port " + strconv.Itoa(tlsPort),
		"tls-cert-file " + certFile,
		"tls-key-file " + keyFile,
		"tls-ca-cert-file " + caFile,
		"tls-auth-clients no",
	}})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
	ping := func(tls *redisclient.TLS) error {
		rdb, err := redisclient.New(redisclient.Options{Addresses: []string{addr}, TLS: tls})
		if err != nil {
			return err
		}
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return rdb.Ping(ctx).Err()
	}
	if err := ping(&redisclient.TLS{CACert: caFile, ServerName: "redis.test"}); err != nil {
		t.Fatalf("TLS with the test CA: %v", err)
	}
	if err := ping(&redisclient.TLS{ServerName: "redis.test"}); err == nil {
		t.Fatal("the system roots trusted a test CA")
	}
	if err := ping(&redisclient.TLS{CACert: caFile, ServerName: "other.test"}); err == nil {
		t.Fatal("a certificate for another name was accepted")
	}
	if err := ping(nil); err == nil {
		t.Fatal("plain text to a TLS port worked")
	}
	if _, err := redisclient.New(redisclient.Options{TLS: &redisclient.TLS{CACert: filepath.Join(dir, "missing.pem")}}); err == nil {
		t.Fatal("a missing ca_cert was accepted")
	}
}

func writeCerts(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis.test"},
		DNSNames: []string{"redis.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server-key.pem", "EC PRIVATE KEY", keyDER)
}
