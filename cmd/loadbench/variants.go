//go:build linux

package main

import (
	"fmt"
	"strings"
)

// variant is one gateway configuration, served by a caddy process of its
// own (the same binary for all): plain reverse_proxy, or modelgate.
type variant struct {
	name string
	what string
	// gateway: clients send the scenarios' gateway requests (else the
	// plain ones).
	gateway bool
	// tls: the upstream is the HTTPS one.
	tls bool
	// managedKey: the variant authenticates with a managed key, created
	// through the admin API once the process is up.
	managedKey bool
	// site is the site block's body; proxy the modelgate providers'
	// proxy block body (empty: none, modelgate's defaults).
	site  string
	proxy string
	// extra goes into the modelgate app block.
	extra string
	// ref is the variant this one's ratios are taken against; default:
	// reference.
	ref string
}

// refName is the variant v is compared with.
func (v *variant) refName() string {
	if v.ref != "" {
		return v.ref
	}
	return reference
}

// reference is the variant every ratio is taken against.
const reference = "tuned"

var variants = map[string]*variant{
	"plain": {
		name: "plain", what: "plain reverse_proxy, Caddy's defaults",
		site: "reverse_proxy {upstream}",
	},
	"tuned": {
		name: "tuned", what: "plain reverse_proxy, transport http { keepalive_idle_conns_per_host 256 }",
		site: "reverse_proxy {upstream} {\n\t\ttransport http {\n\t\t\tkeepalive_idle_conns_per_host 256\n\t\t}\n\t}",
	},
	"modelgate": {
		name: "modelgate", what: "modelgate, a static key, the providers' default proxy",
		gateway: true,
	},
	"modelgate_full": {
		name: "modelgate_full", what: "modelgate with a managed key, rate limits and budgets on every key and owner (set high enough never to refuse), and usage accounting",
		gateway: true, managedKey: true,
		// The limits are parsed and provisioned since the quota engine
		// landed (limits.go). TODO(issue 15): until the accountant admits
		// calls through them and settles usage into the usage recorder
		// (account.go's admit still admits everything), this variant adds
		// the managed key to what every modelgate variant does (pricing,
		// metrics, the access log's fields); the harness needs no change
		// when that wiring lands.
		extra: "limits {\n\t\t\tkey rpm 100000000 tpm 100000000000 concurrent 100000 budget 1000000 month\n\t\t\towner rpm 100000000 tpm 100000000000 budget 1000000 month\n\t\t}",
	},

	// The provider pool suite: what modelgate's provider defaults are
	// chosen from.
	"mg_pool32": {
		name: "mg_pool32", what: "modelgate, providers on Caddy's default pool (32 idle connections per host), as before issue 15",
		gateway: true, proxy: "transport http {\n\t\t\t\tkeepalive_idle_conns_per_host 32\n\t\t\t}",
	},
	"mg_pool256": {
		name: "mg_pool256", what: "modelgate, providers with keepalive_idle_conns_per_host 256",
		gateway: true, proxy: "transport http {\n\t\t\t\tkeepalive_idle_conns_per_host 256\n\t\t\t}",
	},
	"tuned_tls_h1": {
		name: "tuned_tls_h1", ref: "tuned_tls_h1", what: "tuned reverse_proxy to the HTTPS upstream, HTTP/1.1",
		tls:  true,
		site: "reverse_proxy {upstream} {\n\t\ttransport http {\n\t\t\ttls_insecure_skip_verify\n\t\t\tversions 1.1\n\t\t\tkeepalive_idle_conns_per_host 256\n\t\t}\n\t}",
	},
	"tuned_tls_h2": {
		name: "tuned_tls_h2", ref: "tuned_tls_h1", what: "tuned reverse_proxy to the HTTPS upstream, HTTP/2",
		tls:  true,
		site: "reverse_proxy {upstream} {\n\t\ttransport http {\n\t\t\ttls_insecure_skip_verify\n\t\t\tversions 2\n\t\t\tkeepalive_idle_conns_per_host 256\n\t\t}\n\t}",
	},
	"mg_tls_h1": {
		name: "mg_tls_h1", ref: "tuned_tls_h1", what: "modelgate to the HTTPS upstream, HTTP/1.1, the providers' default pool",
		gateway: true, tls: true, proxy: "transport http {\n\t\t\t\ttls_insecure_skip_verify\n\t\t\t\tversions 1.1\n\t\t\t}",
	},
	"mg_tls_h2": {
		name: "mg_tls_h2", ref: "tuned_tls_h1", what: "modelgate to the HTTPS upstream, HTTP/2 (what Caddy negotiates when the upstream offers it)",
		gateway: true, tls: true, proxy: "transport http {\n\t\t\t\ttls_insecure_skip_verify\n\t\t\t}",
	},
}

// ports of one caddy process.
type ports struct {
	admin, http int
	upstream    string // host:port of the upstream
	storage     string // directory
}

// caddyfile is the variant's configuration.
func (v *variant) caddyfile(p ports) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\tadmin 127.0.0.1:%d\n\tpersist_config off\n\tauto_https off\n\thttp_port %d\n\tgrace_period 2s\n\tstorage file_system %s\n", p.admin, p.http, p.storage)
	scheme := "http"
	if v.tls {
		scheme = "https"
	}
	if v.gateway {
		proxy := ""
		if v.proxy != "" {
			proxy = "\n\t\t\tproxy {\n\t\t\t\t" + v.proxy + "\n\t\t\t}"
		}
		fmt.Fprintf(&b, `	modelgate {
		provider oa openai {
			base_url %[1]s://%[2]s/v1
			api_key %[3]s%[6]s
		}
		provider claude anthropic {
			base_url %[1]s://%[2]s
			api_key %[4]s%[6]s
		}
		provider co cohere {
			base_url %[1]s://%[2]s/cohere
			api_key %[5]s%[6]s
		}
`, scheme, p.upstream, upstreamOpenAIKey, upstreamAnthropicKey, upstreamCohereKey, proxy)
		if !v.managedKey {
			fmt.Fprintf(&b, "\t\tkey loadbench %s\n", gatewayKey)
		}
		if v.extra != "" {
			fmt.Fprintf(&b, "\t\t%s\n", v.extra)
		}
		b.WriteString("\t}\n")
	}
	fmt.Fprintf(&b, "}\n\nhttp://127.0.0.1:%d {\n", p.http)
	if v.gateway {
		b.WriteString("\tmodelgate_auth\n\tmodelgate\n")
	} else {
		up := p.upstream
		if v.tls {
			up = "https://" + up
		}
		fmt.Fprintf(&b, "\t%s\n", strings.ReplaceAll(v.site, "{upstream}", up))
	}
	b.WriteString("}\n")
	return b.String()
}
