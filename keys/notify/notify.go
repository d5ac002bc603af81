// Package notify tells a key's owner that the key was found in public: it
// writes the mail and sends it through an SMTP server.
package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/smtp"
	"strings"
	"time"
)

// Leak is what the mail tells: which key, where it was found, what
// happened, what to do. It never holds the secret.
type Leak struct {
	KeyID, KeyName, KeyHint, Owner string
	// Reporter is who found it: "GitHub", "GitLab".
	Reporter string
	// URL and Source say where it was found; URL may be empty.
	URL, Source string
	FoundAt     time.Time
	// Revoked says the key was revoked automatically.
	Revoked bool
	// SettingsURL is the key settings page; may be empty.
	SettingsURL string
}

// clean makes s safe for a header or a body line: control characters
// (CR and LF among them) become spaces.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
}

// Message builds the mail to to, from from, about l.
func Message(from, to string, l Leak, now time.Time) []byte {
	name := clean(l.KeyName)
	var body strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&body, format+"\n", a...) }
	w("Your modelgate API key %q (%s) was found in a public place.", name, clean(l.KeyHint))
	w("")
	w("  Key:       %s (%s), id %s, owner %s", name, clean(l.KeyHint), clean(l.KeyID), clean(l.Owner))
	w("  Found by:  %s secret scanning", clean(l.Reporter))
	if l.Source != "" {
		w("  Found in:  %s", clean(l.Source))
	}
	if l.URL != "" {
		w("  Where:     %s", clean(l.URL))
	}
	if !l.FoundAt.IsZero() {
		w("  When:      %s", l.FoundAt.UTC().Format(time.RFC1123))
	}
	w("")
	w("Anyone who saw it can use it, and bills and data of yours go with it.")
	w("")
	if l.Revoked {
		w("The key has been revoked automatically: it no longer works.")
		w("")
		w("What to do:")
		w("  1. Create a new key on the key settings page%s.", settingsAt(l.SettingsURL))
		w("  2. Put the new key where the old one was used.")
		w("  3. Remove the old key from the place it was found, and from its history.")
		w("  4. Check the key's recent use for requests that were not yours.")
	} else {
		w("The key still works. Delete it now.")
		w("")
		w("What to do:")
		w("  1. Delete the key on the key settings page%s.", settingsAt(l.SettingsURL))
		w("  2. Create a new key there and put it where the old one was used.")
		w("  3. Remove the old key from the place it was found, and from its history.")
		w("  4. Check the key's recent use for requests that were not yours.")
	}
	w("")
	w("This mail never contains a key: only its name and its last characters.")

	var msg bytes.Buffer
	h := func(k, v string) { fmt.Fprintf(&msg, "%s: %s\r\n", k, v) }
	h("From", clean(from))
	h("To", clean(to))
	h("Subject", mime.QEncoding.Encode("utf-8", fmt.Sprintf("Your API key %q was found in public", name)))
	h("Date", now.Format(time.RFC1123Z))
	h("Message-ID", "<"+messageID()+"@modelgate>")
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "quoted-printable")
	msg.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&msg)
	_, _ = qp.Write([]byte(strings.ReplaceAll(body.String(), "\n", "\r\n")))
	_ = qp.Close()
	return msg.Bytes()
}

func settingsAt(u string) string {
	if u == "" {
		return ""
	}
	return ", " + clean(u)
}

func messageID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// SMTP is a mail server to send through.
type SMTP struct {
	// Addr is host:port.
	Addr string
	// Username and Password, when set, authenticate with AUTH PLAIN, which
	// net/smtp allows only over TLS or to localhost.
	Username, Password string
	// From is the envelope sender.
	From string
	// TLS is "starttls" (default: when the server offers it),
	// "require_starttls", "implicit" (SMTPS) or "none".
	TLS string
	// TLSConfig is used for TLS; nil: the defaults, with the host of Addr.
	TLSConfig *tls.Config
	// Timeout bounds the whole exchange. Default: 30 s.
	Timeout time.Duration
	// Hostname is the EHLO name. Default: localhost.
	Hostname string
}

// Send delivers msg to the recipients.
func (s *SMTP) Send(ctx context.Context, to []string, msg []byte) error {
	if len(to) == 0 {
		return errors.New("no recipient")
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host, _, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return fmt.Errorf("smtp address %q: %w", s.Addr, err)
	}
	tlsConf := s.TLSConfig
	if tlsConf == nil {
		tlsConf = &tls.Config{ServerName: host}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return err
	}
	if s.TLS == "implicit" {
		tc := tls.Client(conn, tlsConf)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close() // the handshake's error is the one to report
			return err
		}
		conn = tc
	}
	// The deadline covers every read and write; ctx ending closes the
	// connection at once.
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()

	c, err := smtp.NewClient(conn, host)
	if err != nil {
		_ = conn.Close() // the greeting's error is the one to report
		return err
	}
	defer func() { _ = c.Close() }() // after QUIT, or after the error exchange reports
	if err := s.exchange(c, host, tlsConf, to, msg); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("smtp: %w", ctx.Err())
		}
		return err
	}
	return nil
}

func (s *SMTP) exchange(c *smtp.Client, host string, tlsConf *tls.Config, to []string, msg []byte) error {
	name := s.Hostname
	if name == "" {
		name = "localhost"
	}
	if err := c.Hello(name); err != nil {
		return err
	}
	switch s.TLS {
	case "", "starttls", "require_starttls":
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(tlsConf); err != nil {
				return err
			}
		} else if s.TLS == "require_starttls" {
			return errors.New("smtp: the server does not offer STARTTLS")
		}
	case "implicit", "none":
	default:
		return fmt.Errorf("smtp: unknown tls mode %q", s.TLS)
	}
	if s.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", s.Username, s.Password, host)); err != nil {
			return err
		}
	}
	if err := c.Mail(s.From); err != nil {
		return err
	}
	for _, r := range to {
		if err := c.Rcpt(r); err != nil {
			return err
		}
	}
	wc, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := wc.Write(msg); err != nil {
		return err
	}
	if err := wc.Close(); err != nil {
		return err
	}
	return c.Quit()
}
