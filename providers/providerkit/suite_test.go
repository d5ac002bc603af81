package providerkit_test

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/providerkit"
)

// anthropicSuite is the kit's suite for modelgate's own Anthropic
// translator, with an answer and its stream from the translator's
// testdata: the kit holds for a translator it was not written for.
func anthropicSuite(t testing.TB) providerkit.ChatSuite {
	answer, err := os.ReadFile("../../testdata/providers/anthropic/response/cache_usage.anthropic.json")
	if err != nil {
		t.Fatal(err)
	}
	transcript, err := os.ReadFile("../../testdata/sse/anthropic/cache_usage_include_usage.txt")
	if err != nil {
		t.Fatal(err)
	}
	stream, _, _ := strings.Cut(string(transcript), "\n----------\n")
	return providerkit.ChatSuite{
		Chat:   anthropic.Chat{},
		Model:  "claude-haiku-4-5",
		Answer: answer,
		Stream: []byte(stream + "\n"),
		Usage:  providerkit.Usage{Prompt: 3005, Completion: 7, Total: 3012, Cached: 2000},
		Errors: []providerkit.ErrorCase{{
			Name: "overloaded", Status: 529,
			Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			Want: providers.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "overloaded"},
		}},
	}
}

func TestRunChatAnthropic(t *testing.T) {
	providerkit.RunChat(t, anthropicSuite(t))
}

func FuzzAnthropicStream(f *testing.F) { anthropicSuite(f).FuzzStream(f) }

func FuzzAnthropicResponse(f *testing.F) { anthropicSuite(f).FuzzResponse(f) }

func FuzzAnthropicRequest(f *testing.F) { anthropicSuite(f).FuzzRequest(f) }
