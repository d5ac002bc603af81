// Package responses serves OpenAI's Responses API (POST /v1/responses)
// through the Chat Completions hub, for every chat provider that does not
// speak Responses itself.
//
// A create request becomes a hub chat request (Exchange.ChatBody); the hub's
// answer becomes a Response object (Exchange.Response), and a hub stream of
// chat.completion.chunk events becomes the Responses event stream
// (Exchange.Stream), event by event. Stored responses are kept by the caller
// as records (Exchange.Record), from which History continues a conversation
// (previous_response_id), StoredResponse answers GET /v1/responses/{id} and
// InputItems answers GET /v1/responses/{id}/input_items.
//
// Like the provider translators it works on bytes: it reads JSON with gjson
// and writes it by appending, never unmarshalling whole bodies.
//
// Conventions this package fixes (the README says them to users):
//
//   - A custom (free-form) tool is sent to the chat provider as a function
//     with one string parameter, "input" (CustomInputParam), its format
//     (a Lark or regex grammar) described in the function's description; a
//     call of it comes back as a custom_tool_call item whose input is that
//     string.
//   - Signed reasoning (the hub's thinking_blocks) goes out as a reasoning
//     item's encrypted_content: "mg1." followed by the URL-safe base64 (no
//     padding) of the JSON array of thinking blocks. Given back in a
//     reasoning item, it is restored as thinking_blocks on the assistant
//     message of that turn. Other encrypted_content (OpenAI's own) is
//     dropped: no chat provider can read it.
//   - The provider's reasoning text (reasoning_content) is the reasoning
//     item's summary text.
package responses

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// CustomInputParam is the name of the one string parameter of the function
// a custom tool becomes for the chat provider.
const CustomInputParam = "input"

// Translator translates Responses API requests to the hub and answers back.
// The zero value is ready to use; a Translator is safe for concurrent use.
type Translator struct {
	// Now returns the time for created_at and completed_at; nil means
	// time.Now.
	Now func() time.Time

	// NewID returns a new unique id that starts with prefix ("resp_",
	// "msg_", "fc_", …); nil means prefix followed by 48 random hex digits.
	NewID func(prefix string) string

	// BuiltinTools is what becomes of a built-in tool (web_search,
	// image_generation, code_interpreter, …) that the model's provider
	// has no equivalent of: BuiltinDrop (the default, also for "") or
	// BuiltinRefuse.
	BuiltinTools string
}

func (t Translator) now() time.Time { return providers.Now(t.Now) }

func (t Translator) newID(prefix string) string {
	if t.NewID != nil {
		return t.NewID(prefix)
	}
	var b [24]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return prefix + hex.EncodeToString(b[:])
}

// Info is what the gateway needs to know about a create request before it
// routes it and after it answers.
type Info struct {
	Model  string
	Stream bool

	// Store is whether the response is to be kept (default true): the
	// gateway stores Exchange.Record under the response id, for its owner.
	Store bool

	// PreviousResponseID names the stored response this one continues:
	// the gateway loads that record (404 NotFound when it is missing or
	// another owner's) and passes History(record) to Translator.New.
	PreviousResponseID string
}

// Head reads only what routing and storage need (model, stream, store,
// previous_response_id), checking their types: the request that goes to a
// provider speaking the Responses API itself is passed through as it is,
// with whatever tools and options that provider takes, so nothing else of
// it is judged here. A request to be translated is parsed in full, with
// Parse.
func Head(body []byte) (Info, error) {
	if !providers.ValidJSON(body) {
		return Info{}, &providers.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
			Message: "the request body is not valid JSON (or nests more than " + strconv.Itoa(providers.MaxDepth) + " levels deep)"}
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return Info{}, &providers.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
			Message: "the request body must be a JSON object"}
	}
	r := &Request{size: len(body)}
	for _, key := range [...]string{"model", "stream", "store", "previous_response_id"} {
		if v := root.Get(key); v.Exists() {
			if err := r.set(key, v); err != nil {
				return Info{}, err
			}
		}
	}
	if r.model.Str == "" {
		return Info{}, invalid("model", "you must provide a model parameter")
	}
	return r.Info(), nil
}

// Validate is Parse for a caller that only needs the Info: one that goes
// on to translate the request parses it once, with Parse.
func Validate(body []byte) (Info, error) {
	r, err := Parse(body)
	if err != nil {
		return Info{}, err
	}
	return r.Info(), nil
}

// Info is what routing and storage need to know of the request.
func (r *Request) Info() Info {
	return Info{
		Model:              r.model.Str,
		Stream:             r.stream.Type == gjson.True,
		Store:              r.store.Type != gjson.False,
		PreviousResponseID: r.previousResponseID.Str,
	}
}

// Deleted is the body of a successful DELETE /v1/responses/{id}.
func Deleted(id string) []byte {
	w := jsonw.New(make([]byte, 0, 64+len(id)))
	o := w.Object()
	o.Str("id", id)
	o.Str("object", "response")
	o.Bool("deleted", true)
	o.End()
	b, _ := w.Finish() // straight-line writing: no misuse
	return b
}

// NotFound is the 404 for a response id that is not stored (or is another
// owner's), as OpenAI words it.
func NotFound(id string) *providers.Error {
	return &providers.Error{
		Status:  http.StatusNotFound,
		Type:    "invalid_request_error",
		Param:   "response_id",
		Code:    "not_found",
		Message: "Response with id '" + id + "' not found.",
	}
}

// invalid is a 400 invalid_request_error about param.
func invalid(param, msg string) *providers.Error {
	return &providers.Error{Status: http.StatusBadRequest, Type: "invalid_request_error",
		Code: "invalid_value", Param: param, Message: msg}
}
