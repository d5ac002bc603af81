package messages

import (
	"path/filepath"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/bedrock"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

// TestThinkingReachesBedrock follows a thinking round trip through the hub
// into a provider that can take signed thinking back, Bedrock's Converse
// for a Claude model: each thinking block arrives with its text and
// signature exactly, the redacted block with its data, in order and before
// the tool call; the unsigned thinking of a later turn does not pose as
// signed.
func TestThinkingReachesBedrock(t *testing.T) {
	body := translatortest.ReadFile(t, filepath.Join(requestDir, "thinking_roundtrip.messages.json"))
	req, err := Chat{Inner: bedrock.Chat{}}.ChatRequest(body, "anthropic.claude-sonnet-4-5-20250929-v1:0")
	if err != nil {
		t.Fatalf("ChatRequest: %v", err)
	}
	msgs := gjson.GetBytes(req.Body, "messages")
	first := msgs.Get("1.content")
	if msgs.Get("1.role").Str != "assistant" {
		t.Fatalf("messages: %s", msgs.Raw)
	}
	if got := first.Get("0.reasoningContent.reasoningText"); got.Get("text").Str != "Two calls \u2014 \"Paris\" first.\n" ||
		got.Get("signature").Str != "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds/+==" {
		t.Errorf("thinking block: %s", first.Get("0").Raw)
	}
	if got := first.Get("1.reasoningContent.redactedContent").Str; got != "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2Y==" {
		t.Errorf("redacted block: %s", first.Get("1").Raw)
	}
	if first.Get("2.toolUse.toolUseId").Str != "toolu_01" {
		t.Errorf("the tool call does not follow the thinking: %s", first.Raw)
	}
	later := msgs.Get("3.content")
	later.ForEach(func(_, b gjson.Result) bool {
		if b.Get("reasoningContent.reasoningText.signature").Exists() {
			t.Errorf("unsigned reasoning was sent as signed: %s", later.Raw)
		}
		return true
	})
}
