// Command caddy is Caddy with the standard modules and modelgate: what
// `xcaddy build` makes, built with plain `go build` so that the process
// tests (integration/process_test.go) can run a real caddy binary when no xcaddy build
// is at hand (MODELGATE_CADDY unset).
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/modelgate/modelgate"
)

func main() {
	caddycmd.Main()
}
