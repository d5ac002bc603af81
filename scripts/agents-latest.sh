#!/usr/bin/env bash
# Runs the agent tests (integration/agents_test.go: Claude Code and Codex CLI
# through the gateway against the fake provider, passed through and
# translated, plainly and through a tool loop) against the latest published
# versions of the agents, rather than the versions scripts/test.sh pins, and
# reports what broke. Run it weekly, or when an agent ships a release:
#
#	./scripts/agents-latest.sh            # the latest of both
#	CLAUDE_CODE=2.1.400 CODEX=0.180.0 ./scripts/agents-latest.sh   # given versions
#
# The requests each agent sent go to .tmp/agents-latest/requests/ (one JSON
# body a file), to compare with the recorded ones in
# providers/responses/testdata/codex-*/ and
# providers/messages/testdata/claude-code-*/; the script lists the tool and
# item types they hold that the recorded ones do not. It exits non-zero when
# a test failed.
set -euo pipefail
cd "$(dirname "$0")/.."

export NO_PROXY=127.0.0.1,localhost,::1 no_proxy=127.0.0.1,localhost,::1
claude_version=${CLAUDE_CODE:-latest}
codex_version=${CODEX:-latest}
dir=.tmp/agents-latest
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT

echo "== installing @anthropic-ai/claude-code@$claude_version and @openai/codex@$codex_version into $dir"
rm -rf "$dir/requests"
npm install --prefix "$dir" --cache .tmp/npm-cache --no-audit --no-fund --loglevel=error \
	"@anthropic-ai/claude-code@$claude_version" "@openai/codex@$codex_version"
claude="$PWD/$dir/node_modules/.bin/claude"
codex="$PWD/$dir/node_modules/.bin/codex"
echo "Claude Code $(HOME="$home" "$claude" --version 2>/dev/null) (pinned: $(grep -o '^claude_code_version=.*' scripts/test.sh | cut -d= -f2))"
echo "Codex CLI   $(HOME="$home" "$codex" --version 2>/dev/null) (pinned: $(grep -o '^codex_version=.*' scripts/test.sh | cut -d= -f2))"

echo "== the agent tests"
status=0
MODELGATE_CLAUDE_CODE="$claude" MODELGATE_CODEX="$codex" MODELGATE_REQUIRE_CLAUDE_CODE=1 MODELGATE_REQUIRE_AGENTS=1 \
	MODELGATE_AGENT_RECORD="$PWD/$dir/requests" \
	go test -count=1 -v -run '^TestAgent' ./integration >"$dir/test.log" 2>&1 || status=$?
grep -E '^\s*--- (PASS|FAIL|SKIP)' "$dir/test.log" || true
if [ "$status" -ne 0 ]; then
	echo
	echo "== what broke (the whole log: $dir/test.log)"
	grep -E '^\s+agents_test\.go:[0-9]+:' "$dir/test.log" | cut -c1-2000 || tail -50 "$dir/test.log"
fi

# The tool and item types the agents sent, beside those of the recorded
# requests: a new one is what a translation may not know yet.
types() { grep -ho '"type": *"[a-z_0-9]*"' "$@" 2>/dev/null | sed 's/ //g' | sort -u; }
if compgen -G "$dir/requests/*.json" >/dev/null; then
	new=$(comm -23 <(types "$dir"/requests/*.json) \
		<(types providers/responses/testdata/codex-*/*.responses.json providers/messages/testdata/claude-code-*/*.messages.json))
	echo
	if [ -n "$new" ]; then
		echo "== types the recorded requests do not have (record the new requests as test data):"
		echo "$new"
	else
		echo "== no tool, item or block type the recorded requests do not have"
	fi
fi
exit "$status"
