package messages

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

// claudeCodeDir holds requests Claude Code 2.1.332 sent (long texts
// clipped): <name>.messages.json, and the hub request each becomes for a
// provider that does not speak the Messages API, <name>.chat.json.
const claudeCodeDir = "testdata/claude-code-2.1.332"

// TestClaudeCodeRequests checks that what Claude Code sends today — its
// betas' fields (context_management, adaptive thinking with
// output_config.effort, tools with defer_loading), cache_control on
// blocks, signed thinking before a tool call — passes the Messages API's
// validation and becomes a hub request that passes the hub's: what the
// hub cannot express is left out (cache_control, context_management),
// thinking becomes reasoning_effort, and the signed thinking block rides
// along for a provider that can take it back.
func TestClaudeCodeRequests(t *testing.T) {
	translatortest.Golden(t, claudeCodeDir, ".messages.json", ".chat.json", func(t *testing.T, name string, body []byte) []byte {
		if _, err := Validate(body); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		hub, err := ToChat(body)
		if err != nil {
			t.Fatalf("ToChat: %v", err)
		}
		if _, err := providers.ValidateChat(hub); err != nil {
			t.Fatalf("the hub request does not pass ValidateChat: %v", err)
		}
		if gjson.GetBytes(hub, "reasoning_effort").Str != "high" {
			t.Errorf("reasoning_effort = %s, want high (output_config.effort)", gjson.GetBytes(hub, "reasoning_effort").Raw)
		}
		return hub
	})
}
