package responses

import (
	"errors"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Policies for built-in tools (Translator.BuiltinTools): what becomes of
// a built-in tool that the model's provider has no equivalent of.
const (
	// BuiltinDrop leaves such a tool out of the request to the provider
	// and names it in Exchange.Dropped (the gateway's
	// X-Modelgate-Dropped-Tools header). The default.
	BuiltinDrop = "drop"

	// BuiltinRefuse refuses the request: 400 unsupported_parameter,
	// naming the tool.
	BuiltinRefuse = "refuse"
)

// DroppedToolsHeader is the response header that names the built-in
// tools a request was served without (BuiltinDrop), comma-separated.
const DroppedToolsHeader = "X-Modelgate-Dropped-Tools"

// builtins decides, per the Translator's policy, what becomes of each
// built-in tool of the request: OpenAI's web search with live access
// becomes the hub's web_search_options, which a provider with a search
// of its own maps to it (Anthropic's web search tool, Gemini's Google
// Search grounding); the others are dropped or refused. A web search
// restricted to OpenAI's cache (external_web_access false, as Codex sends
// it unless told to search live) has no equivalent elsewhere: a live
// search would reach further than the client allowed.
func (x *Exchange) builtins() error {
	for i := range x.r.builtins {
		b := &x.r.builtins[i]
		if webSearchTools[b.typ] && b.v.Get("external_web_access").Type != gjson.False && x.webSearch == nil {
			x.webSearch = b
			continue
		}
		if err := x.drop(b, ""); err != nil {
			return err
		}
	}
	return nil
}

// drop leaves b out of the request, or refuses it under BuiltinRefuse;
// why, when given, says why the provider cannot run it.
func (x *Exchange) drop(b *builtin, why string) error {
	if x.t.BuiltinTools == BuiltinRefuse {
		if why == "" {
			why = "it runs at OpenAI, and this model's provider has no equivalent"
			if webSearchTools[b.typ] {
				why = "external_web_access is false (a search of OpenAI's cache), which no other provider offers; set it true for a live search where the provider has one"
			}
		}
		return providers.UnsupportedBecause(b.param+".type", "the built-in tool "+b.typ+" is not supported: "+why+
			" (the gateway's builtin_tools policy refuses such requests; with builtin_tools drop it would be left out)")
	}
	for _, d := range x.dropped {
		if d == b.typ {
			return nil
		}
	}
	x.dropped = append(x.dropped, b.typ)
	return nil
}

// Dropped lists the types of the built-in tools left out of the request
// (BuiltinDrop), in the order of the request; empty when none was.
func (x *Exchange) Dropped() []string { return x.dropped }

// writeWebSearch writes the hub's web_search_options for the request's
// web search: its search_context_size and its user_location, in the
// hub's shape ({"type":"approximate","approximate":{…}}).
func (x *Exchange) writeWebSearch(o jsonw.Object) {
	b := x.webSearch
	if b == nil {
		return
	}
	ws := o.Object("web_search_options")
	if s := b.v.Get("search_context_size"); s.Type == gjson.String {
		ws.Raw("search_context_size", s.Raw)
	}
	if loc := b.v.Get("user_location"); loc.IsObject() {
		ul := ws.Object("user_location")
		ul.Str("type", "approximate")
		ap := ul.Object("approximate")
		for _, k := range [...]string{"city", "country", "region", "timezone"} {
			if v := loc.Get(k); v.Type == gjson.String {
				ap.Raw(k, v.Raw)
			}
		}
		ap.End()
		ul.End()
	}
	if d := b.v.Get("filters.allowed_domains"); d.IsArray() {
		// Not in OpenAI's chat shape: the translators that can restrict a
		// search (Anthropic's allowed_domains) read it.
		ws.Raw("allowed_domains", d.Raw)
	}
	ws.End()
}

// ChatRequest translates the hub request for c, the chat translator of
// the model's provider. A provider that cannot search the web refuses
// the hub's web_search_options: then, under BuiltinDrop, the request goes
// without it and Dropped names the web search; under BuiltinRefuse the
// client gets the 400, naming its tool.
func (x *Exchange) ChatRequest(c providers.Chat, model string) (providers.Request, error) {
	req, err := c.ChatRequest(x.chat, model)
	if err == nil || x.webSearch == nil {
		return req, err
	}
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Param != "web_search_options" {
		return req, err
	}
	if err := x.drop(x.webSearch, "this model's provider has no web search the gateway can use ("+pe.Message+")"); err != nil {
		return req, err
	}
	body, derr := sjson.DeleteBytes(x.chat, "web_search_options")
	if derr != nil {
		return req, err
	}
	x.chat, x.webSearch = body, nil
	return c.ChatRequest(x.chat, model)
}
