package providertest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
)

// TestResponsesSDK drives the Responses route with openai-go's Responses
// client: a text answer, a function call and its output, a custom tool
// call, a stream read with the SDK's accumulator, and the scripted stream
// failures, which end in response.failed or in no terminal event at all.
func TestResponsesSDK(t *testing.T) {
	s := newFake(t)
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey("ok"), option.WithMaxRetries(0))

	r, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:        "gpt-5",
		Instructions: openai.String("be brief"),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("hello sdk")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.OutputText() != "echo: hello sdk" || r.Status != "completed" || r.Usage.InputTokens != 4 || r.Usage.OutputTokens != 3 || !strings.HasPrefix(r.ID, "resp_") {
		t.Errorf("text: %s %q %+v", r.Status, r.OutputText(), r.Usage)
	}

	// A function tool is called with the user's text; its output is
	// answered.
	tools := []responses.ToolUnionParam{responses.ToolParamOfFunction("lookup", map[string]any{"type": "object"}, false)}
	r, err = client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gpt-5", Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("find foxes")},
	})
	if err != nil {
		t.Fatal(err)
	}
	call := r.Output[len(r.Output)-1]
	if call.Type != "function_call" || call.Name != "lookup" || call.Arguments.OfString != `{"query":"find foxes"}` || call.CallID == "" {
		t.Fatalf("function call: %s", r.RawJSON())
	}
	output := responses.ResponseInputItemParamOfFunctionCallOutput("three foxes")
	output.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	r, err = client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gpt-5", Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("find foxes", responses.EasyInputMessageRoleUser),
			{OfFunctionCall: &responses.ResponseFunctionToolCallParam{CallID: call.CallID, Name: call.Name, Arguments: call.Arguments.OfString}},
			output,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.OutputText() != "tool said: three foxes" {
		t.Errorf("after the tool: %q", r.OutputText())
	}

	// A custom tool's call carries the text as its input, streamed.
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "gpt-5", Tools: []responses.ToolUnionParam{responses.ToolParamOfCustom("apply_patch")},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("*** Begin Patch\n*** End Patch")},
	})
	var acc responses.ResponseAccumulator
	var last responses.ResponseStreamEventUnion
	for stream.Next() {
		ev := stream.Current()
		var server responses.ResponsesServerEventUnion
		if err := server.UnmarshalJSON([]byte(ev.RawJSON())); err != nil {
			t.Fatal(err)
		}
		if err := acc.AddEvent(server); err != nil {
			t.Fatalf("%s: %v", ev.Type, err)
		}
		last = ev
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	snap := acc.Snapshot()
	if last.Type != "response.completed" || len(snap.Output) != 1 || snap.Output[0].Type != "custom_tool_call" || snap.Output[0].Input != "*** Begin Patch\n*** End Patch" {
		t.Errorf("custom tool stream: %s %+v", last.Type, snap.Output)
	}

	for _, tc := range []struct{ model, terminal string }{{"midstream-error", "response.failed"}, {"cutoff", ""}} {
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: tc.model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("a few words here")},
		})
		terminal := ""
		for stream.Next() {
			switch typ := stream.Current().Type; typ {
			case "response.completed", "response.incomplete", "response.failed":
				terminal = typ
			}
		}
		if terminal != tc.terminal || stream.Err() != nil {
			t.Errorf("%s: terminal %q, err %v", tc.model, terminal, stream.Err())
		}
	}
}

// TestResponsesStrict: malformed requests are OpenAI's 400s naming the
// field.
func TestResponsesStrict(t *testing.T) {
	s := newFake(t)
	for body, param := range map[string]string{
		`{"model":"m"}`: "input",
		`{"model":"m","input":[{"role":"robot","content":"x"}]}`:      "input[0].role",
		`{"model":"m","input":"x","tools":[{"type":"function"}]}`:     "tools[0].name",
		`{"model":"m","input":"x","text":{"format":{"type":"yaml"}}}`: "text.format.type",
		`{"model":"m","input":"x","max_output_tokens":1}`:             "max_output_tokens",
	} {
		res, got := Send(t, http.MethodPost, s.URL+"/v1/responses", body, oaAuth...)
		if res.StatusCode != 400 || !isOpenAIError(got) || gjson.Get(got, "error.param").Str != param {
			t.Errorf("%s: %d %s, want a 400 about %s", body, res.StatusCode, got, param)
		}
	}
}
