//go:build !linux

// Command loadbench measures modelgate against plain Caddy reverse_proxy;
// it reads /proc and pins processes with taskset, so it runs on Linux only.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "loadbench: Linux only (it reads /proc and pins processes with taskset)")
	os.Exit(1)
}
