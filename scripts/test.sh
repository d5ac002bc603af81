#!/usr/bin/env bash
# The whole modelgate test suite. CI runs exactly this (.ci/run); so should
# you, from the repository root: ./scripts/test.sh
#
# Steps: formatting, go vet, golangci-lint (.golangci.yml; here and in
# bench/), the load harness's vet and unit tests (bench/, a module of its
# own), every fuzz target briefly, the xcaddy build
# (derived from xcaddy.json; a test keeps this line in step with it), the
# built binary's module list, `caddy adapt --validate` of every Caddyfile in
# the repository, one iteration of every benchmark, then the race-enabled
# unit tests and the caddytest integration tests (one package at a time),
# which include the process tests running the built binary (crash, cluster,
# the quick start driven by Claude Code) and the agent tests (Claude Code and
# Codex CLI through the gateway), then the example provider module's own
# tests (examples/provider, a Go module of its own). Last, it checks that the
# suite left nothing in the user's own Caddy directories.
set -euo pipefail
cd "$(dirname "$0")/.."

export NO_PROXY=127.0.0.1,localhost,::1 no_proxy=127.0.0.1,localhost,::1
export GOFLAGS=${GOFLAGS:--buildvcs=false}

step() { printf '\n== %s\n' "$*"; }

# The user's own Caddy directories, where a caddy outside the suite keeps
# its storage and autosaved config: the suite must not write there. Every
# step runs with Caddy's directories (XDG_DATA_HOME, XDG_CONFIG_HOME) in a
# temporary one instead; the go command keeps its own settings file.
user_caddy_dirs=("${XDG_DATA_HOME:-$HOME/.local/share}/caddy" "${XDG_CONFIG_HOME:-$HOME/.config}/caddy")
snapshot_user_caddy_dirs() {
	for d in "${user_caddy_dirs[@]}"; do
		if [ -e "$d" ]; then find "$d" -printf '%p %y %s %T@\n'; else echo "$d absent"; fi
	done | sort
}
user_caddy_before=$(snapshot_user_caddy_dirs)
suite_home=$(mktemp -d)
GOENV=$(go env GOENV)
export GOENV XDG_DATA_HOME="$suite_home/data" XDG_CONFIG_HOME="$suite_home/config"
fuzzlog=$(mktemp)
trap 'rm -rf "$suite_home" "$fuzzlog"' EXIT

step "tools"
need=()
command -v gcc >/dev/null 2>&1 || need+=(gcc)                   # the race detector needs cgo
command -v chromium >/dev/null 2>&1 || need+=(chromium)         # the key settings page's browser test
command -v npm >/dev/null 2>&1 || need+=(npm)                   # installs Claude Code, below
if [ ${#need[@]} -gt 0 ]; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
# The browser test fails rather than skips here: CI must run it. Its
# screenshot goes to .artifacts/.
export MODELGATE_REQUIRE_BROWSER=1
# Claude Code, at a pinned version, drives the quick start in its process
# test; installed into .tmp/ (npm's cache too), kept there between runs.
claude_code_version=2.1.332
claude_code=.tmp/claude-code/node_modules/.bin/claude
if [ "$(HOME="$suite_home" "$claude_code" --version 2>/dev/null | cut -d' ' -f1)" != "$claude_code_version" ]; then
	npm install --prefix .tmp/claude-code --cache .tmp/npm-cache --no-audit --no-fund --loglevel=error \
		"@anthropic-ai/claude-code@$claude_code_version"
fi
MODELGATE_CLAUDE_CODE="$PWD/$claude_code"
export MODELGATE_CLAUDE_CODE MODELGATE_REQUIRE_CLAUDE_CODE=1
HOME="$suite_home" "$MODELGATE_CLAUDE_CODE" --version
# Codex CLI, at a pinned version, runs through the gateway in the agent
# tests (integration/agents_test.go) with Claude Code; installed likewise.
# scripts/agents-latest.sh runs those tests against the latest releases.
codex_version=0.171.0
codex=.tmp/codex/node_modules/.bin/codex
if [ "$(HOME="$suite_home" "$codex" --version 2>/dev/null | awk '{print $2}')" != "$codex_version" ]; then
	npm install --prefix .tmp/codex --cache .tmp/npm-cache --no-audit --no-fund --loglevel=error \
		"@openai/codex@$codex_version"
fi
MODELGATE_CODEX="$PWD/$codex"
export MODELGATE_CODEX MODELGATE_REQUIRE_AGENTS=1
HOME="$suite_home" "$MODELGATE_CODEX" --version
# golangci-lint, at a pinned version, for the lint step: built with the go
# command into .tmp/, kept there between runs.
golangci_lint_version=2.15.0
golangci_lint=$PWD/.tmp/golangci-lint/golangci-lint
if [ "$("$golangci_lint" version --short 2>/dev/null)" != "$golangci_lint_version" ]; then
	GOBIN="$PWD/.tmp/golangci-lint" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v$golangci_lint_version"
fi
"$golangci_lint" version
go version

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

# The linters and their exclusions, each with its reason, are in
# .golangci.yml; bench/ is linted with the same file.
step "golangci-lint"
"$golangci_lint" run ./...
(cd bench && "$golangci_lint" run ./...)

# The load harness is a module of its own (bench/): vetted and its unit
# tests run there, against this checkout through its replace directive.
step "the load harness (bench/)"
(cd bench && go vet ./... && go test ./...)

# Every target gets an equal share of FUZZ_BUDGET seconds (at least 2 s), so
# the step stays within its budget as targets multiply; FUZZTIME, when set,
# gives each target that long instead.
targets=()
for pkg in $(go list ./...); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		targets+=("$pkg $target")
	done
done
if [ -z "${FUZZTIME:-}" ]; then
	per=$(( ${FUZZ_BUDGET:-150} / ${#targets[@]} ))
	FUZZTIME="$(( per < 2 ? 2 : per ))s"
fi
step "fuzz targets: ${#targets[@]}, $FUZZTIME each"
# Go 1.26's fuzz coordinator can fail a target at the -fuzztime boundary with
# a bare "context deadline exceeded" although it found nothing (go.dev/issue/75804,
# fixed in Go 1.27). Such a run wrote no failing input; the target's corpus is
# then run once more as a plain test, and only a real failure fails the step.
for t in "${targets[@]}"; do
	pkg=${t% *} target=${t#* }
	echo "-- $pkg $target"
	if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tee "$fuzzlog"; then
		continue
	fi
	if grep -q 'Failing input written to' "$fuzzlog" || ! grep -q '^    context deadline exceeded$' "$fuzzlog"; then
		exit 1
	fi
	echo "-- $target: the fuzz coordinator's deadline race (no failing input); its corpus again:"
	go test -count=1 -run "^${target}\$" "$pkg"
done

step "xcaddy build"
go tool xcaddy build v2.11.9 --with github.com/modelgate/modelgate@v0.0.0=. --output ./caddy

# The process tests and benchmarks run this binary rather than building their own.
export MODELGATE_CADDY="$PWD/caddy"

step "built modules"
./caddy list-modules | grep -E 'modelgate' | sort >.tmp-modules.txt || true
if ! diff -u testdata/modules.txt .tmp-modules.txt; then
	rm -f .tmp-modules.txt; echo "the built caddy lacks modules of testdata/modules.txt"; exit 1
fi
rm -f .tmp-modules.txt

step "caddy adapt --validate, every Caddyfile"
# Validation provisions the config, so every {env.X} it reads needs a value;
# each gets a distinct dummy one of hex digits (no real secret is involved;
# static keys must not share a secret, and some values must be base64).
logdir=$(mktemp -d)
# Google credentials that need no private key, for the vertex provider.
printf '{"type":"authorized_user","client_id":"validate","client_secret":"validate","refresh_token":"validate"}' >"$logdir/credentials.json"
while IFS= read -r f; do
	echo "-- $f"
	vars=()
	for name in $(grep -oE '\{env\.[A-Za-z_][A-Za-z0-9_]*\}' "$f" | sed -E 's/\{env\.(.*)\}/\1/' | sort -u); do
		case $name in
		*_CREDENTIALS) vars+=("$name=$logdir/credentials.json") ;; # a credentials file's path
		*_BASE_URL) ;; # unset: the provider's public endpoint
		*) vars+=("$name=$(printf '%s' "$name" | sha256sum | cut -c1-16)") ;;
		esac
	done
	# A site name read when the Caddyfile is adapted (an example's).
	for name in $(grep -oE '^\{\$[A-Z_]*_SITE\}' "$f" | sed -E 's/\{\$(.*)\}/\1/' | sort -u); do
		vars+=("$name=gateway.example.com")
	done
	# Validation provisions the storage (the local CA lands there): the
	# team example's goes to the temporary directory, not /var/lib.
	env "${vars[@]}" MG_LOG_DIR="$logdir" MODELGATE_STORAGE="$logdir/storage" ./caddy adapt --config "$f" --validate >/dev/null
done < <(git ls-files -co --exclude-standard | grep -E '(^|/)Caddyfile$|\.Caddyfile$')
rm -rf "$logdir"

step "benchmarks, one iteration each"
go test -run '^$' -bench . -benchtime 1x ./...

step "unit tests (race)"
go test -race -short -count=1 -timeout 20m ./...

step "integration tests (caddytest, process, browser: one package at a time)"
go test -race -p 1 -count=1 -timeout 45m ./integration/...

step "the example provider module (examples/provider), against the conformance kit"
# A Go module of its own: the root module's steps do not reach it. Its
# gateway test runs Caddy on caddytest's ports, so it follows the
# integration tests rather than running beside them.
(cd examples/provider && go vet ./... && go test -race -count=1 ./...)

step "the user's Caddy directories are as the suite found them"
user_caddy_after=$(snapshot_user_caddy_dirs)
if [ "$user_caddy_before" != "$user_caddy_after" ]; then
	echo "the suite wrote to ${user_caddy_dirs[*]}:"
	diff <(echo "$user_caddy_before") <(echo "$user_caddy_after") || true
	exit 1
fi

echo
echo "all checks passed"
