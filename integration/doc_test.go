// Package integration holds the tests of the gateway as users run it:
// caddytest integration tests with real Caddyfiles, golden adapt tests,
// process tests of the built binary (crashes, clusters, the CLI), the key
// settings page in a real browser, and the end-to-end load and batch
// benchmarks. It imports the root package, so every module the xcaddy
// build plugs in is registered here too.
package integration

import _ "github.com/modelgate/modelgate" // registers every modelgate module
