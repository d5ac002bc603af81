package notify

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/keys/notify/smtptest"
)

var leak = Leak{
	KeyID: "key_01", KeyName: "deploy", KeyHint: "mgk_...a1B2", Owner: "team-a",
	Reporter: "GitHub", URL: "https://github.com/octo/repo/blob/abc/.env", Source: "commit",
	FoundAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), SettingsURL: "https://gw.example/account/keys/",
}

// parse reads a message as a mail reader would and returns its decoded body.
func parse(t *testing.T, msg []byte) (*mail.Message, string) {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(msg))
	if err != nil {
		t.Fatalf("the message does not parse: %v\n%s", err, msg)
	}
	b, err := io.ReadAll(quotedprintable.NewReader(m.Body))
	if err != nil {
		t.Fatal(err)
	}
	return m, string(b)
}

func TestMessage(t *testing.T) {
	now := time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		leak    Leak
		want    []string
		notWant []string
	}{
		{"not revoked", leak,
			[]string{"deploy", "mgk_...a1B2", "GitHub", "commit", "https://github.com/octo/repo/blob/abc/.env", "https://gw.example/account/keys/", "Delete the key", "still works", "never contains a key"},
			[]string{"revoked automatically"}},
		{"revoked", func() Leak { l := leak; l.Revoked = true; return l }(),
			[]string{"revoked automatically", "Create a new key", "https://gw.example/account/keys/"},
			[]string{"still works"}},
		{"no URL, no settings page", func() Leak { l := leak; l.URL, l.SettingsURL = "", ""; return l }(),
			[]string{"deploy", "key settings page."},
			[]string{"Where:"}},
	} {
		m, body := parse(t, Message("modelgate@gw.example", "a@example.com", tc.leak, now))
		if m.Header.Get("From") != "modelgate@gw.example" || m.Header.Get("To") != "a@example.com" {
			t.Errorf("%s: headers %v", tc.name, m.Header)
		}
		subj, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
		if err != nil || !strings.Contains(subj, `"deploy"`) {
			t.Errorf("%s: subject %q %v", tc.name, subj, err)
		}
		if d, err := m.Header.Date(); err != nil || !d.Equal(now) {
			t.Errorf("%s: date %v %v", tc.name, d, err)
		}
		for _, s := range tc.want {
			if !strings.Contains(body, s) {
				t.Errorf("%s: body lacks %q:\n%s", tc.name, s, body)
			}
		}
		for _, s := range tc.notWant {
			if strings.Contains(body, s) {
				t.Errorf("%s: body has %q:\n%s", tc.name, s, body)
			}
		}
	}
}

func TestMessageNoHeaderInjection(t *testing.T) {
	l := leak
	l.KeyName = "x\r\nBcc: evil@example.com"
	l.URL = "https://e.example/\r\n\r\nforged body"
	msg := Message("modelgate@gw.example", "a@example.com\r\nCc: evil@example.com", l, time.Now())
	m, _ := parse(t, msg)
	for _, h := range []string{"Bcc", "Cc"} {
		if v := m.Header.Get(h); v != "" {
			t.Errorf("injected %s: %q", h, v)
		}
	}
}

func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: k}}}, pool
}

func TestSend(t *testing.T) {
	serverTLS, roots := selfSigned(t)
	msg := Message("modelgate@gw.example", "a@example.com", leak, time.Now())
	for _, tc := range []struct {
		name string
		opt  smtptest.Options
		smtp SMTP
		user string
		ok   bool
	}{
		{"plain", smtptest.Options{}, SMTP{TLS: "none"}, "", true},
		{"starttls when offered, none offered", smtptest.Options{}, SMTP{}, "", true},
		{"starttls required, none offered", smtptest.Options{}, SMTP{TLS: "require_starttls"}, "", false},
		{"starttls and auth", smtptest.Options{TLSConfig: serverTLS, Users: map[string]string{"mg": "pw"}},
			SMTP{Username: "mg", Password: "pw", TLSConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}}, "mg", true},
		{"wrong password", smtptest.Options{TLSConfig: serverTLS, Users: map[string]string{"mg": "pw"}},
			SMTP{Username: "mg", Password: "nope", TLSConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}}, "", false},
		{"untrusted certificate", smtptest.Options{TLSConfig: serverTLS}, SMTP{}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink, err := smtptest.Start(tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			defer sink.Close()
			s := tc.smtp
			s.Addr, s.From = sink.Addr, "modelgate@gw.example"
			err = s.Send(context.Background(), []string{"a@example.com"}, msg)
			if (err == nil) != tc.ok {
				t.Fatalf("Send: %v", err)
			}
			got := sink.Messages()
			if !tc.ok {
				if len(got) != 0 {
					t.Errorf("a failed send delivered %d messages", len(got))
				}
				return
			}
			if len(got) != 1 || got[0].From != "modelgate@gw.example" || strings.Join(got[0].To, ",") != "a@example.com" || got[0].User != tc.user {
				t.Fatalf("delivered %+v", got)
			}
			if !bytes.Equal(bytes.TrimRight(got[0].Data, "\r\n"), bytes.TrimRight(msg, "\r\n")) {
				t.Errorf("the message changed on the way:\n%s\n---\n%s", got[0].Data, msg)
			}
		})
	}
}

func TestSendFails(t *testing.T) {
	// Nothing listens.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	s := SMTP{Addr: addr, From: "m@gw.example"}
	if err := s.Send(context.Background(), []string{"a@example.com"}, []byte("x")); err == nil {
		t.Error("sent to a closed port")
	}
	// A server that never greets: ctx ends the wait.
	ln, _ = net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			time.Sleep(5 * time.Second)
		}
	}()
	s.Addr = ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Send(ctx, []string{"a@example.com"}, []byte("x")); err == nil {
		t.Error("a silent server accepted mail")
	}
	if err := s.Send(context.Background(), nil, []byte("x")); err == nil {
		t.Error("no recipient")
	}
}

func FuzzMessage(f *testing.F) {
	f.Add("deploy", "mgk_...a1B2", "https://e.example/x", "commit", "a@example.com")
	f.Add("x\r\nBcc: e@e", "h\n", "\r\n\r\n", "\x00", "a@example.com\nCc: e@e")
	f.Add("ünïcode ☃", "", "", "", "b@example.com")
	f.Fuzz(func(t *testing.T, name, hint, url, source, to string) {
		l := leak
		l.KeyName, l.KeyHint, l.URL, l.Source = name, hint, url, source
		m, err := mail.ReadMessage(bytes.NewReader(Message("m@gw.example", to, l, time.Now())))
		if err != nil {
			t.Fatalf("does not parse: %v", err)
		}
		for k := range m.Header {
			switch k {
			case "From", "To", "Subject", "Date", "Message-Id", "Mime-Version", "Content-Type", "Content-Transfer-Encoding":
			default:
				t.Fatalf("header %q", k)
			}
		}
	})
}
