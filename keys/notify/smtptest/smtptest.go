// Package smtptest is an SMTP sink for tests: a server on loopback that
// accepts mail and keeps it. It speaks what net/smtp needs: EHLO/HELO,
// STARTTLS, AUTH PLAIN, MAIL, RCPT, DATA, RSET, NOOP and QUIT.
package smtptest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/textproto"
	"strings"
	"sync"
)

// Message is one accepted mail.
type Message struct {
	From string
	To   []string
	Data []byte
	// User is the AUTH user, if the client authenticated.
	User string
}

// Options configure the sink.
type Options struct {
	// TLSConfig, when set, makes the sink offer STARTTLS.
	TLSConfig *tls.Config
	// Users, when set, makes the sink offer AUTH PLAIN for these
	// user/password pairs.
	Users map[string]string
}

// maxData bounds one message.
const maxData = 10 << 20

// Server is a running sink.
type Server struct {
	// Addr is the host:port it listens on, on 127.0.0.1.
	Addr string

	opt     Options
	ln      net.Listener
	wg      sync.WaitGroup
	mu      sync.Mutex
	msgs    []Message
	arrived chan struct{} // closed and replaced on each message
}

// Start listens on 127.0.0.1 at a free port.
func Start(opt Options) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: ln.Addr().String(), opt: opt, ln: ln, arrived: make(chan struct{})}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Close stops the sink and waits for its connections to end.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

// Messages returns the mail accepted so far, in order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Wait returns the messages once at least n arrived, or ctx's error.
func (s *Server) Wait(ctx context.Context, n int) ([]Message, error) {
	for {
		s.mu.Lock()
		msgs, ch := append([]Message(nil), s.msgs...), s.arrived
		s.mu.Unlock()
		if len(msgs) >= n {
			return msgs, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return msgs, fmt.Errorf("%d of %d messages arrived: %w", len(msgs), n, ctx.Err())
		}
	}
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { _ = c.Close() }()
			s.serve(c)
		}()
	}
}

// session is one connection's state.
type session struct {
	tp   *textproto.Conn
	conn net.Conn
	tls  bool
	user string
	from string
	to   []string
}

func (s *Server) serve(c net.Conn) {
	ss := &session{tp: textproto.NewConn(c), conn: c}
	reply := func(code int, msg string) bool { return ss.tp.PrintfLine("%d %s", code, msg) == nil }
	if !reply(220, "smtptest ready") {
		return
	}
	for {
		line, err := ss.tp.ReadLine()
		if err != nil {
			return
		}
		if len(line) > 1000 {
			reply(500, "line too long")
			continue
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO":
			lines := []string{"smtptest"}
			if s.opt.TLSConfig != nil && !ss.tls {
				lines = append(lines, "STARTTLS")
			}
			if s.opt.Users != nil {
				lines = append(lines, "AUTH PLAIN")
			}
			lines = append(lines, "8BITMIME")
			for i, l := range lines {
				sep := "-"
				if i == len(lines)-1 {
					sep = " "
				}
				if ss.tp.PrintfLine("250%s%s", sep, l) != nil {
					return
				}
			}
		case "HELO":
			reply(250, "smtptest")
		case "STARTTLS":
			if s.opt.TLSConfig == nil || ss.tls {
				reply(502, "no STARTTLS")
				continue
			}
			reply(220, "go ahead")
			tc := tls.Server(ss.conn, s.opt.TLSConfig)
			if tc.Handshake() != nil {
				return
			}
			ss = &session{tp: textproto.NewConn(tc), conn: tc, tls: true}
		case "AUTH":
			mech, resp, _ := strings.Cut(arg, " ")
			if s.opt.Users == nil || !strings.EqualFold(mech, "PLAIN") {
				reply(504, "mechanism not supported")
				continue
			}
			b, err := base64.StdEncoding.DecodeString(resp)
			parts := bytes.Split(b, []byte{0})
			if err != nil || len(parts) != 3 || s.opt.Users[string(parts[1])] != string(parts[2]) {
				reply(535, "authentication failed")
				continue
			}
			ss.user = string(parts[1])
			reply(235, "authenticated")
		case "MAIL":
			if s.opt.Users != nil && ss.user == "" {
				reply(530, "authentication required")
				continue
			}
			ss.from, ss.to = address(arg), nil
			reply(250, "ok")
		case "RCPT":
			ss.to = append(ss.to, address(arg))
			reply(250, "ok")
		case "DATA":
			if ss.from == "" || len(ss.to) == 0 {
				reply(503, "need MAIL and RCPT first")
				continue
			}
			reply(354, "end with <CRLF>.<CRLF>")
			data, err := readData(ss.tp.R)
			if err != nil {
				reply(552, err.Error())
				return
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, Message{From: ss.from, To: ss.to, Data: data, User: ss.user})
			close(s.arrived)
			s.arrived = make(chan struct{})
			s.mu.Unlock()
			ss.from, ss.to = "", nil
			reply(250, "queued")
		case "RSET":
			ss.from, ss.to = "", nil
			reply(250, "ok")
		case "NOOP":
			reply(250, "ok")
		case "QUIT":
			reply(221, "bye")
			return
		default:
			reply(502, "command not implemented")
		}
	}
}

// address takes the address out of "FROM:<a@b> SIZE=…" or "TO:<a@b>".
func address(arg string) string {
	i, j := strings.IndexByte(arg, '<'), strings.IndexByte(arg, '>')
	if i < 0 || j < i {
		return ""
	}
	return arg[i+1 : j]
}

// readData reads a DATA section: lines up to a lone ".", dot-unstuffed.
func readData(r *bufio.Reader) ([]byte, error) {
	var out bytes.Buffer
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if line == ".\r\n" || line == ".\n" {
			return out.Bytes(), nil
		}
		line = strings.TrimPrefix(line, ".")
		if out.Len()+len(line) > maxData {
			return nil, fmt.Errorf("message larger than %d bytes", maxData)
		}
		out.WriteString(line)
	}
}
