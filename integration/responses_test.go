package integration

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
)

// TestIntegrationResponses drives the Responses API with openai-go's
// Responses client and its stream accumulator: passed through to OpenAI
// (byte for byte but for the model, stored by the provider and reached
// through the gateway), translated for other chat providers (text, a tool
// loop across turns on previous_response_id, a custom tool as Codex sends
// it, streams that accumulate to the completed response, usage), stored
// responses per owner (GET, input_items, DELETE), and failures.
func TestIntegrationResponses(t *testing.T) {
	fake, _ := startProviders(t)
	c := sdk(aliceKey)
	ctx := context.Background()

	t.Run("pass-through to Azure OpenAI's v1 API", func(t *testing.T) {
		res, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "azure_v1/prod-gpt-4o",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello azure")}})
		if err != nil || res.OutputText() != "echo: hello azure" {
			t.Fatalf("%v %+v", err, res)
		}
		sent := fake.Requests()
		if last := sent[len(sent)-1]; last.Path != "/openai/v1/responses" || gjson.GetBytes(last.Body, "model").Str != "prod-gpt-4o" {
			t.Errorf("the provider got %s %s", last.Path, last.Body)
		}
		if got, err := c.Responses.Get(ctx, res.ID, responses.ResponseGetParams{}); err != nil || got.ID != res.ID {
			t.Errorf("GET through the pointer: %v", err)
		}
		// Azure stores the response: it continues there, and only there.
		before := len(fake.Requests())
		_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "openai/gpt-4o", PreviousResponseID: openai.String(res.ID),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and then?")}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || !strings.Contains(apiErr.Message, "Provider azure_v1 stores it") {
			t.Errorf("continued on another provider: %v", err)
		}
		if n := len(fake.Requests()) - before; n != 0 {
			t.Errorf("%d provider calls for a response stored elsewhere", n)
		}
		next, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "azure_v1/prod-gpt-4o", PreviousResponseID: openai.String(res.ID),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and then?")}})
		sent = fake.Requests()
		if err != nil || next.OutputText() != "echo: and then?" || gjson.GetBytes(sent[len(sent)-1].Body, "previous_response_id").Str != res.ID {
			t.Errorf("continued on its provider: %v %+v", err, next)
		}
	})

	t.Run("pass-through keeps what only the provider knows", func(t *testing.T) {
		// Built-in tools, background and truncation are OpenAI's to run:
		// the gateway passes them on instead of judging them.
		before := len(fake.Requests())
		body := `{"model":"openai/gpt-4o","input":"search","tools":[{"type":"web_search"},{"type":"code_interpreter","container":{"type":"auto"}}],"truncation":"auto","background":false}`
		status, got, _ := request(t, http.MethodPost, gatewayBase+"/v1/responses", body, "Authorization", "Bearer "+aliceKey)
		sent := fake.Requests()[before:]
		if status != 200 || len(sent) != 1 || string(sent[0].Body) != strings.Replace(body, `"openai/gpt-4o"`, `"gpt-4o"`, 1) {
			t.Fatalf("%d %s", status, got)
		}
		// Translated for a chat provider, the same request is refused:
		// the gateway cannot run OpenAI's tools.
		status, got, _ = request(t, http.MethodPost, gatewayBase+"/v1/responses",
			strings.Replace(body, "openai/gpt-4o", "anthropic/claude-sonnet-4-5", 1), "Authorization", "Bearer "+aliceKey)
		if status != 400 || gjson.Get(got, "error.type").Str != "invalid_request_error" || len(fake.Requests()) != before+1 {
			t.Errorf("translated built-in tools: %d %s", status, got)
		}
	})

	t.Run("pass-through to OpenAI", func(t *testing.T) {
		before := len(fake.Requests())
		body := `{"model":"openai/gpt-4o","input":"hello there","instructions":"Be terse.","x_future_field":{"model":"keep"},"max_output_tokens":64}`
		status, got, _ := request(t, http.MethodPost, gatewayBase+"/v1/responses", body, "Authorization", "Bearer "+aliceKey)
		sent := fake.Requests()[before:]
		if status != 200 || len(sent) != 1 || sent[0].Path != "/v1/responses" {
			t.Fatalf("%d %s", status, got)
		}
		if want := strings.Replace(body, `"openai/gpt-4o"`, `"gpt-4o"`, 1); string(sent[0].Body) != want {
			t.Errorf("the provider got\n%s\nwant\n%s", sent[0].Body, want)
		}
		id := gjson.Get(got, "id").Str
		// Stored by the provider; reached, and deleted, through the gateway.
		stored, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{})
		if err != nil || stored.ID != id || stored.OutputText() != gjson.Get(got, "output.0.content.0.text").Str {
			t.Fatalf("GET: %v %+v", err, stored)
		}
		if err := c.Responses.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{}); !isStatus(err, 404) {
			t.Errorf("after DELETE: %v", err)
		}
	})

	for _, model := range []string{"anthropic/claude-sonnet-4-5", "groq/llama-3.3-70b"} {
		t.Run(model+"/translated: text, stream, tool loop over previous_response_id", func(t *testing.T) {
			res, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: model,
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello there")}})
			if err != nil {
				t.Fatal(err)
			}
			if res.OutputText() != "echo: hello there" || res.Status != "completed" || res.Usage.OutputTokens != 3 || res.Usage.TotalTokens == 0 {
				t.Fatalf("%s %q %+v", res.Status, res.OutputText(), res.Usage)
			}

			s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: model,
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("stream me please")}})
			var acc responses.ResponseAccumulator
			var last responses.ResponseStreamEventUnion
			for s.Next() {
				ev := s.Current()
				var server responses.ResponsesServerEventUnion
				if err := server.UnmarshalJSON([]byte(ev.RawJSON())); err != nil {
					t.Fatal(err)
				}
				if err := acc.AddEvent(server); err != nil {
					t.Fatalf("%s: %v", ev.Type, err)
				}
				last = ev
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if last.Type != "response.completed" || acc.Snapshot().OutputText() != "echo: stream me please" || last.Response.Usage.OutputTokens != 4 {
				t.Fatalf("%s %q %+v", last.Type, acc.Snapshot().OutputText(), last.Response.Usage)
			}

			tools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "search",
				Parameters: map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}}}}}
			first, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: model, Tools: tools,
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("weather in Paris")}})
			if err != nil {
				t.Fatal(err)
			}
			var callID string
			for _, it := range first.Output {
				if it.Type == "function_call" && it.Name == "search" && gjson.Get(it.Arguments.OfString, "query").Str == "weather in Paris" {
					callID = it.CallID
				}
			}
			if callID == "" {
				t.Fatalf("no function call: %+v", first.Output)
			}
			second, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: model, Tools: tools,
				PreviousResponseID: openai.String(first.ID),
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					functionOutput(callID, "sunny, 21 C")}}})
			if err != nil {
				t.Fatal(err)
			}
			if second.OutputText() != "tool said: sunny, 21 C" || second.PreviousResponseID != first.ID {
				t.Errorf("second turn %q (previous %q)", second.OutputText(), second.PreviousResponseID)
			}

			// Stored for its owner: GET, the conversation's input items,
			// DELETE; another owner sees nothing.
			got, err := c.Responses.Get(ctx, second.ID, responses.ResponseGetParams{})
			if err != nil || got.OutputText() != second.OutputText() {
				t.Fatalf("GET: %v", err)
			}
			items, err := c.Responses.InputItems.List(ctx, second.ID, responses.InputItemListParams{})
			if err != nil || len(items.Data) < 3 {
				t.Fatalf("input items: %v %+v", err, items)
			}
			bob := sdk(bobKey)
			if _, err := bob.Responses.Get(ctx, second.ID, responses.ResponseGetParams{}); !isStatus(err, 404) {
				t.Errorf("another owner: %v", err)
			}
			if err := c.Responses.Delete(ctx, second.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Responses.Get(ctx, second.ID, responses.ResponseGetParams{}); !isStatus(err, 404) {
				t.Errorf("after DELETE: %v", err)
			}
		})
	}

	t.Run("a custom tool, as Codex sends apply_patch", func(t *testing.T) {
		res, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "anthropic/claude-sonnet-4-5", Store: openai.Bool(false),
			Tools: []responses.ToolUnionParam{{OfCustom: &responses.CustomToolParam{Name: "apply_patch", Description: openai.String("Apply a patch")}}},
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("*** Begin Patch")}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Output) == 0 || res.Output[len(res.Output)-1].Type != "custom_tool_call" || res.Output[len(res.Output)-1].Name != "apply_patch" {
			t.Fatalf("%+v", res.Output)
		}
		if _, err := c.Responses.Get(ctx, res.ID, responses.ResponseGetParams{}); !isStatus(err, 404) {
			t.Errorf("store false was stored: %v", err)
		}
	})

	t.Run("failures", func(t *testing.T) {
		_, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "anthropic/fail-429",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
		if !isStatus(err, 429) {
			t.Errorf("fail-429: %v", err)
		}
		_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "anthropic/claude-sonnet-4-5",
			PreviousResponseID: openai.String("resp_nosuchresponse"),
			Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
		if !isStatus(err, 404) {
			t.Errorf("unknown previous_response_id: %v", err)
		}
		s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "anthropic/midstream-error",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi there")}})
		var last string
		for s.Next() {
			last = s.Current().Type
		}
		if last != "response.failed" {
			t.Errorf("a translated stream that failed mid-way ended with %q", last)
		}
		// A provider that closes its stream after one event, before its
		// last state: passed through (OpenAI's own Responses) it ends
		// with the API's error event, translated with response.failed.
		for model, want := range map[string]string{"openai/cutoff": "error", "anthropic/cutoff": "response.failed"} {
			s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: model,
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi there")}})
			var last string
			for s.Next() {
				last = s.Current().Type
			}
			if last != want {
				t.Errorf("%s: a stream the provider closed before its end ended with %q (error %v), want %q", model, last, s.Err(), want)
			}
		}
	})
}

// isStatus reports whether err is an API error with status.
func isStatus(err error, status int) bool {
	var apiErr *openai.Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == status
}

// functionOutput is a function_call_output input item.
func functionOutput(callID, output string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = openai.String(callID)
	return item
}
