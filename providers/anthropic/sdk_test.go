package anthropic

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

// TestRequestsFitSDK checks every translated request golden against the
// request type of Anthropic's official Go SDK: decoded into
// anthropic.MessageNewParams and encoded again it must come out the same,
// so every field, block and value the translation sends is one the SDK
// (and the API it is generated from) knows, in the shape it knows.
func TestRequestsFitSDK(t *testing.T) {
	for _, name := range translatortest.GoldenCases(t, requestDir, ".anthropic.json") {
		t.Run(name, func(t *testing.T) {
			data := translatortest.ReadFile(t, filepath.Join(requestDir, name+".anthropic.json"))
			var params anthropic.MessageNewParams
			if err := json.Unmarshal(data, &params); err != nil {
				t.Fatalf("the SDK cannot read the request: %v", err)
			}
			again, err := json.Marshal(params)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(translatortest.Canonical(t, "sdk", again), sdkForm(translatortest.Canonical(t, name, data))) {
				t.Errorf("the SDK's MessageNewParams does not keep the request as it is\nsent: %s\nsdk:  %s", data, again)
			}
		})
	}
}

// sdkForm rewrites a decoded request into the form in which the SDK's
// types write it: string content and system as one text block, and no
// "stream" (the SDK sets it by the method called, not in the params).
func sdkForm(v any) any {
	req := v.(map[string]any)
	delete(req, "stream")
	text := func(s any) any {
		if str, ok := s.(string); ok {
			return []any{map[string]any{"type": "text", "text": str}}
		}
		return s
	}
	if sys, ok := req["system"]; ok {
		req["system"] = text(sys)
	}
	for _, m := range req["messages"].([]any) {
		msg := m.(map[string]any)
		msg["content"] = text(msg["content"])
		for _, b := range msg["content"].([]any) {
			if block := b.(map[string]any); block["type"] == "tool_result" {
				if c, ok := block["content"]; ok {
					block["content"] = text(c)
				}
			}
		}
	}
	return req
}

// TestAnswersFitSDK checks that the Anthropic answers the tests translate
// are messages as the SDK reads them: every content block of a type it
// knows, and a stop reason of its list.
func TestAnswersFitSDK(t *testing.T) {
	known := map[anthropic.StopReason]bool{"": true}
	for _, r := range []anthropic.StopReason{anthropic.StopReasonEndTurn, anthropic.StopReasonMaxTokens,
		anthropic.StopReasonStopSequence, anthropic.StopReasonToolUse, anthropic.StopReasonPauseTurn,
		anthropic.StopReasonRefusal, anthropic.StopReasonModelContextWindowExceeded} {
		known[r] = true
	}
	for _, name := range translatortest.GoldenCases(t, responseDir, ".anthropic.json") {
		data := translatortest.ReadFile(t, filepath.Join(responseDir, name+".anthropic.json"))
		var msg anthropic.Message
		if err := json.Unmarshal(data, &msg); err != nil {
			t.Errorf("%s: the SDK cannot read the answer: %v", name, err)
			continue
		}
		if !known[msg.StopReason] {
			t.Errorf("%s: stop_reason %q is not one the SDK knows", name, msg.StopReason)
		}
		for i, block := range msg.Content {
			switch block.AsAny().(type) {
			case anthropic.TextBlock, anthropic.ToolUseBlock, anthropic.ThinkingBlock, anthropic.RedactedThinkingBlock:
			case anthropic.ServerToolUseBlock, anthropic.WebSearchToolResultBlock:
				// Anthropic's server tools run on its side; the
				// translation leaves them out.
			default:
				t.Errorf("%s: content[%d] of type %q is not a block the SDK knows", name, i, block.Type)
			}
		}
	}
}
