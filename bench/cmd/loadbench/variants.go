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
	// redis: the modelgate app's storage, and so its shared state (the
	// limits' and budgets' counters), on the harness's redis-server, as
	// each instance of a cluster keeps them.
	redis bool
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
		site: "reverse_proxy {upstream} {\ntransport http {\nkeepalive_idle_conns_per_host 256\n}\n}",
	},
	"modelgate": {
		name: "modelgate", what: "modelgate, a static key, the providers' default proxy",
		gateway: true,
	},
	"modelgate_key": {
		name: "modelgate_key", what: "modelgate with a managed key and no limits or budgets: modelgate_full's key alone (usage is recorded, as in every modelgate variant)",
		gateway: true, managedKey: true,
	},
	"modelgate_limit": {
		name: "modelgate_limit", what: "modelgate with a managed key, a rate limit (the key's requests per minute, set high enough never to refuse) and usage accounting",
		gateway: true, managedKey: true,
		extra: "limits {\nkey rpm 100000000\n}",
	},
	"modelgate_full": {
		name: "modelgate_full", what: "modelgate with a managed key, rate limits and budgets on every key and owner (set high enough never to refuse), and usage accounting",
		gateway: true, managedKey: true,
		// The accountant admits every call through these limits and
		// budgets (quota engine) and records its usage per key, owner,
		// model, provider and day: what a team with every feature on
		// runs.
		extra: fullLimits,
	},
	"modelgate_guards": {
		name: "modelgate_guards", what: "modelgate with a pii guard (every detector, mask) on requests and answers, streamed answers included",
		gateway: true,
		// The guard reads every text of each request and answer; the
		// scenarios' texts hold nothing to mask (the common case).
		extra: "guardrails {\nguard pii {\ntype pii\naction mask\n}\n}",
	},
	"modelgate_guards_request": {
		name: "modelgate_guards_request", what: "modelgate_guards' guard on requests only: what guarding a request costs, apart from its answer",
		gateway: true,
		extra:   "guardrails {\nguard pii {\ntype pii\naction mask\napply request\n}\n}",
	},
	"modelgate_key_redis": {
		name: "modelgate_key_redis", what: "modelgate_key as one instance of a cluster: a managed key and usage accounting, no limits or budgets, its storage and shared state on a redis-server on the gateway's CPU",
		gateway: true, managedKey: true, redis: true,
	},
	"modelgate_redis": {
		name: "modelgate_redis", what: "modelgate_full as one instance of a cluster: its storage and its shared state (every limit's and budget's counters) on a redis-server on the gateway's CPU",
		gateway: true, managedKey: true, redis: true,
		// Admitting and settling a request are then a round trip to
		// Redis each, scripts that run the same operations as the
		// in-process state.
		extra: fullLimits,
	},

	// The provider pool suite: what modelgate's provider defaults are
	// chosen from.
	"mg_pool32": {
		name: "mg_pool32", what: "modelgate, providers on Caddy's default pool (32 idle connections per host) instead of modelgate's default",
		gateway: true, proxy: "transport http {\nkeepalive_idle_conns_per_host 32\n}",
	},
	"mg_pool256": {
		name: "mg_pool256", what: "modelgate, providers with keepalive_idle_conns_per_host 256",
		gateway: true, proxy: "transport http {\nkeepalive_idle_conns_per_host 256\n}",
	},
	"mg_buf64k": {
		name: "mg_buf64k", what: "modelgate, providers with 64 KiB connection buffers (read_buffer, write_buffer; Caddy's default is 4 KiB)",
		gateway: true, proxy: "transport http {\nread_buffer 64KiB\nwrite_buffer 64KiB\n}",
	},
	"tuned_tls_h1": {
		name: "tuned_tls_h1", ref: "tuned_tls_h1", what: "tuned reverse_proxy to the HTTPS upstream, HTTP/1.1",
		tls:  true,
		site: "reverse_proxy {upstream} {\ntransport http {\ntls_insecure_skip_verify\nversions 1.1\nkeepalive_idle_conns_per_host 256\n}\n}",
	},
	"tuned_tls_h2": {
		name: "tuned_tls_h2", ref: "tuned_tls_h1", what: "tuned reverse_proxy to the HTTPS upstream, HTTP/2",
		tls:  true,
		site: "reverse_proxy {upstream} {\ntransport http {\ntls_insecure_skip_verify\nversions 2\nkeepalive_idle_conns_per_host 256\n}\n}",
	},
	"mg_tls_h1": {
		name: "mg_tls_h1", ref: "tuned_tls_h1", what: "modelgate to the HTTPS upstream, HTTP/1.1, the providers' default pool",
		gateway: true, tls: true, proxy: "transport http {\ntls_insecure_skip_verify\nversions 1.1\n}",
	},
	"mg_tls_h2": {
		name: "mg_tls_h2", ref: "tuned_tls_h1", what: "modelgate to the HTTPS upstream, HTTP/2 (what Caddy negotiates when the upstream offers it)",
		gateway: true, tls: true, proxy: "transport http {\ntls_insecure_skip_verify\n}",
	},
}

// fullLimits are modelgate_full's limits and budgets: on every key and
// owner, set high enough never to refuse.
const fullLimits = "limits {\nkey rpm 100000000 tpm 100000000000 concurrent 100000 budget 1000000 month\nowner rpm 100000000 tpm 100000000000 budget 1000000 month\n}"

// ports of one caddy process.
type ports struct {
	admin, http int
	upstream    string // host:port of the upstream
	storage     string // directory
	redis       string // host:port of the redis-server, for variants on Redis
}

// caddyfile is the variant's configuration.
func (v *variant) caddyfile(p ports) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{\nadmin 127.0.0.1:%d\npersist_config off\nauto_https off\nhttp_port %d\ngrace_period 2s\nstorage file_system %s\n", p.admin, p.http, p.storage)
	scheme := "http"
	if v.tls {
		scheme = "https"
	}
	if v.gateway {
		proxy := ""
		if v.proxy != "" {
			proxy = "proxy {\n" + v.proxy + "\n}\n"
		}
		b.WriteString("modelgate {\n")
		// The batch suite measures batches run in the gateway: the
		// replayed upstream has no batch API of its own.
		for _, pr := range []struct{ name, typ, path, key, opts string }{
			{"oa", "openai", "/v1", upstreamOpenAIKey, "batch gateway\n"},
			{"claude", "anthropic", "", upstreamAnthropicKey, "batch gateway\n"},
			{"co", "cohere", "/cohere", upstreamCohereKey, ""},
		} {
			fmt.Fprintf(&b, "provider %s %s {\nbase_url %s://%s%s\napi_key %s\n%s%s}\n", pr.name, pr.typ, scheme, p.upstream, pr.path, pr.key, pr.opts, proxy)
		}
		if !v.managedKey {
			fmt.Fprintf(&b, "key loadbench %s\n", gatewayKey)
		}
		if v.extra != "" {
			fmt.Fprintf(&b, "%s\n", v.extra)
		}
		if v.redis {
			// Each caddy process its own keys on the one server.
			fmt.Fprintf(&b, "storage modelgate_redis {\naddress %s\nkey_prefix loadbench-%d\n}\n", p.redis, p.http)
		}
		b.WriteString("}\n")
	}
	fmt.Fprintf(&b, "}\n\nhttp://127.0.0.1:%d {\n", p.http)
	if v.gateway {
		b.WriteString("modelgate_auth\nmodelgate\n")
	} else {
		up := p.upstream
		if v.tls {
			up = "https://" + up
		}
		fmt.Fprintf(&b, "%s\n", strings.ReplaceAll(v.site, "{upstream}", up))
	}
	b.WriteString("}\n")
	return indent(b.String(), 0)
}

// indent indents Caddyfile lines by their nesting, starting at depth tabs.
func indent(text string, depth int) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" && (len(out) == 0 || out[len(out)-1] == "" || strings.HasSuffix(out[len(out)-1], "{")) {
			continue // no blank line at the start of a block or after another
		}
		if strings.HasPrefix(line, "}") {
			depth--
		}
		if line == "" {
			out = append(out, "") // no trailing tabs
		} else {
			out = append(out, strings.Repeat("\t", depth)+line)
		}
		if strings.HasSuffix(line, "{") {
			depth++
		}
	}
	return strings.Join(out, "\n")
}
