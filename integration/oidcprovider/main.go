// Command oidcprovider is the test OpenID Connect provider of the
// single-sign-on process test (integration/sso_process_test.go): the
// oauth2-proxy project's mockoidc, served on a loopback port. It prints
// its issuer, client id and client secret as one JSON line, then reads
// users as JSON lines on its standard input and queues each for the next
// login ({"sub", "email", "username", "groups"}); a login with an empty
// queue is mockoidc's default user. It exits when its input closes.
//
// It is a Go module of its own so that mockoidc and what it needs stay out
// of the gateway's go.mod; the test builds it with go build.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"

	"github.com/oauth2-proxy/mockoidc"
)

type user struct {
	Sub      string   `json:"sub"`
	Email    string   `json:"email"`
	Username string   `json:"username"`
	Groups   []string `json:"groups"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "oidcprovider:", err)
		os.Exit(1)
	}
}

func run() error {
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	if err := m.Start(ln, nil); err != nil {
		return err
	}
	defer m.Shutdown()
	cfg := m.Config()
	if err := json.NewEncoder(os.Stdout).Encode(map[string]string{
		"issuer": cfg.Issuer, "client_id": cfg.ClientID, "client_secret": cfg.ClientSecret,
	}); err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var u user
		if err := json.Unmarshal(in.Bytes(), &u); err != nil {
			return fmt.Errorf("a user line: %v", err)
		}
		m.QueueUser(&mockoidc.MockUser{Subject: u.Sub, Email: u.Email, EmailVerified: true,
			PreferredUsername: u.Username, Groups: u.Groups})
		fmt.Println("queued", u.Sub)
	}
	return in.Err()
}
