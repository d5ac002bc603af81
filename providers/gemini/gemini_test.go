package gemini

import (
	"fmt"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

const (
	requestDir  = "../../testdata/providers/gemini"
	responseDir = "../../testdata/providers/gemini/response"

	// testModel is the provider's model name the golden requests are
	// translated for; the unified inputs use the gateway alias "my-gemini".
	testModel = "gemini-3-flash-preview"
)

// seqIDs returns an id generator that counts: 000…001, 000…002, …, so
// that translations are reproducible and two translations of the same
// answer (streamed and not) make the same ids.
func seqIDs() func() string {
	n := 0
	return func() string {
		n++
		return fmt.Sprintf("%024d", n)
	}
}

// testChat returns the Chat the tests use, with a fresh id sequence.
func testChat() Chat { return Chat{Now: translatortest.Now, newID: seqIDs()} }

func TestChatRequestGolden(t *testing.T) {
	translatortest.Golden(t, requestDir, ".unified.json", ".gemini.json", func(t *testing.T, _ string, in []byte) []byte {
		info, err := providers.ValidateChat(in)
		if err != nil {
			t.Fatalf("the input does not pass ValidateChat: %v", err)
		}
		req, err := testChat().ChatRequest(in, testModel)
		if err != nil {
			t.Fatalf("ChatRequest: %v", err)
		}
		wantPath, wantQuery := "/models/"+testModel+":generateContent", ""
		if info.Stream {
			wantPath, wantQuery = "/models/"+testModel+":streamGenerateContent", "alt=sse"
		}
		if req.Path != wantPath || req.Query != wantQuery || req.Header != nil || req.Framing != Framing {
			t.Errorf("Path %q, Query %q, Header %v; want %q, %q, none, and Gemini's framing", req.Path, req.Query, req.Header, wantPath, wantQuery)
		}
		return req.Body
	})
}

func TestChatResponseGolden(t *testing.T) {
	translatortest.ChatResponseGolden(t, responseDir, ".gemini.json", func(body []byte) ([]byte, providers.Used, error) {
		return testChat().ChatResponse(body)
	})
}
