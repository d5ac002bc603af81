package responses

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Request is a CreateResponse body that Parse checked: the fields the
// translation reads, each the only occurrence of its key. The zero
// gjson.Result stands for an absent field.
type Request struct {
	model, input, instructions, tools, toolChoice, parallelToolCalls               gjson.Result
	text, reasoning, maxOutputTokens, maxToolCalls, temperature, topP, topLogprobs gjson.Result
	store, previousResponseID, stream, include, metadata                           gjson.Result
	user, safetyIdentifier, promptCacheKey, promptCacheRetention, serviceTier      gjson.Result

	// toolList is tools, parsed (a namespace's tools each on its own, and
	// the tools tool_search outputs in the input made available); send
	// marks those sent to the provider (tool_choice allowed_tools may
	// narrow them).
	toolList []tool
	send     []bool
	// builtins are the built-in tools of tools, which OpenAI runs itself:
	// New maps each to the hub or applies the Translator's BuiltinTools
	// policy.
	builtins []builtin
	// choice is the hub's tool_choice value ("" for none to send).
	choice string

	includeEncrypted, includeLogprobs bool

	size int // of the body
}

// tool is one function or custom tool of the request, one function of a
// namespace, or the client-run tool_search.
type tool struct {
	custom bool
	search bool   // the tool_search tool the client runs (execution "client")
	name   string // the tool's name (a namespace's function: its name within it)
	// namespace is the namespace a function belongs to, "" for none.
	namespace string
	// hub is the function's name in the hub: the name, or for a
	// namespace's function "<namespace>__<name>" (NamespaceSeparator),
	// since chat tools have no namespaces.
	hub string
	// found is set for a tool a tool_search output made available: it
	// yields to a tool of tools with the same name.
	found bool
	v     gjson.Result // the tool object

	// Its fields, the first of duplicate keys.
	typ, nameV, description, parameters, strict, format gjson.Result
	// nsDescription is the description of the namespace it belongs to.
	nsDescription gjson.Result
}

// builtin is a built-in tool of the request.
type builtin struct {
	param string // where it is: tools[3]
	typ   string
	v     gjson.Result
}

// NamespaceSeparator joins a namespace and the name of one of its
// functions into the name the function has in the hub (and at the
// provider): the function spawn_agent of the namespace collaboration is
// collaboration__spawn_agent there. A call of it comes back as a
// function_call with name spawn_agent and namespace collaboration.
const NamespaceSeparator = "__"

// toolSearchName is the name of the function the client-run tool_search
// tool becomes in the hub.
const toolSearchName = "tool_search"

// hubTool returns the tool whose hub name is name, or nil.
func (r *Request) hubTool(name string) *tool {
	for i := range r.toolList {
		if r.toolList[i].hub == name {
			return &r.toolList[i]
		}
	}
	return nil
}

// Hosted (built-in) tool types: OpenAI runs them itself; a chat provider
// has its own equivalent at best (web search), which New maps them to.
var hostedTools = map[string]bool{
	"web_search": true, "web_search_preview": true, "web_search_2025_08_26": true,
	"web_search_preview_2025_03_11": true, "file_search": true, "computer": true,
	"computer_use": true, "computer_use_preview": true, "code_interpreter": true,
	"image_generation": true, "mcp": true, "local_shell": true, "shell": true,
	"apply_patch": true, "tool_search": true,
}

// webSearchTools are the built-in tool types of OpenAI's web search.
var webSearchTools = map[string]bool{
	"web_search": true, "web_search_preview": true, "web_search_2025_08_26": true,
	"web_search_preview_2025_03_11": true,
}

// Parse checks a CreateResponse body thoroughly enough that New can trust
// its shape. Errors are *providers.Error: 400 invalid_request_error with
// param naming the field (input[2].content[0].image_url, say), or 400
// unsupported_parameter for what no chat provider can serve.
func Parse(body []byte) (*Request, error) {
	if !providers.ValidJSON(body) {
		return nil, &providers.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
			Message: "the request body is not valid JSON (or nests more than " + strconv.Itoa(providers.MaxDepth) + " levels deep)"}
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, &providers.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
			Message: "the request body must be a JSON object"}
	}
	r := &Request{size: len(body)}
	var err error
	seen := make(map[string]bool, 16)
	root.ForEach(func(key, v gjson.Result) bool {
		if seen[key.Str] {
			err = invalid(key.Str, key.Str+" must be given only once")
			return false
		}
		seen[key.Str] = true
		err = r.set(key.Str, v)
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if r.model.Str == "" {
		return nil, invalid("model", "you must provide a model parameter")
	}
	if !r.input.Exists() && r.previousResponseID.Str == "" {
		return nil, invalid("input", "input is required")
	}
	if r.input.IsArray() {
		i := 0
		r.input.ForEach(func(_, it gjson.Result) bool {
			err = checkItem("input["+strconv.Itoa(i)+"]", it)
			i++
			return err == nil
		})
		if err != nil {
			return nil, err
		}
	}
	if err := r.parseTools(); err != nil {
		return nil, err
	}
	if err := r.parseToolChoice(); err != nil {
		return nil, err
	}
	return r, nil
}

// set records one top-level field, checking its type, or refuses it.
// Fields this gateway does not know are ignored, as are those that only
// tune OpenAI's own service (access_programs, prompt_cache_options,
// client_metadata, stream_options.include_obfuscation, …).
func (r *Request) set(key string, v gjson.Result) error {
	null := v.Type == gjson.Null
	switch key {
	case "model":
		if v.Type != gjson.String || v.Str == "" {
			return invalid("model", "model must be a non-empty string")
		}
		r.model = v
	case "input":
		if v.Type != gjson.String && !v.IsArray() {
			return invalid("input", "input must be a string or an array of input items")
		}
		r.input = v
	case "instructions":
		if !null && v.Type != gjson.String {
			return invalid("instructions", "instructions must be a string")
		}
		r.instructions = v
	case "tools":
		if !null && !v.IsArray() {
			return invalid("tools", "tools must be an array")
		}
		r.tools = v
	case "tool_choice":
		if !null && v.Type != gjson.String && !v.IsObject() {
			return invalid("tool_choice", "tool_choice must be a string or an object")
		}
		r.toolChoice = v
	case "parallel_tool_calls", "store", "stream":
		if !null && !providers.IsBool(v) {
			return invalid(key, key+" must be a boolean")
		}
		switch key {
		case "parallel_tool_calls":
			r.parallelToolCalls = v
		case "store":
			r.store = v
		default:
			r.stream = v
		}
	case "background":
		if !null && !providers.IsBool(v) {
			return invalid(key, key+" must be a boolean")
		}
		if v.Type == gjson.True {
			return providers.UnsupportedBecause("background", "background responses are not supported: the gateway answers every request while the connection is open; send it without background (streaming keeps a long answer's connection busy)")
		}
	case "text":
		return r.setText(v)
	case "reasoning":
		return r.setReasoning(v)
	case "max_output_tokens":
		if !null && (!providers.IsInt(v) || v.Int() < 16) {
			return invalid(key, "max_output_tokens must be an integer of at least 16")
		}
		r.maxOutputTokens = v
	case "max_tool_calls":
		if !null && (!providers.IsInt(v) || v.Int() < 0) {
			return invalid(key, "max_tool_calls must be a non-negative integer")
		}
		r.maxToolCalls = v // limits built-in tool calls, of which there are none
	case "temperature", "top_p":
		if !null && v.Type != gjson.Number {
			return invalid(key, key+" must be a number")
		}
		if key == "temperature" {
			r.temperature = v
		} else {
			r.topP = v
		}
	case "top_logprobs":
		if !null && (!providers.IsInt(v) || v.Int() < 0 || v.Int() > 20) {
			return invalid(key, "top_logprobs must be an integer from 0 to 20")
		}
		r.topLogprobs = v
	case "previous_response_id":
		if !null && (v.Type != gjson.String || v.Str == "") {
			return invalid(key, "previous_response_id must be a response id")
		}
		r.previousResponseID = v
	case "stream_options":
		if !null && !v.IsObject() {
			return invalid(key, "stream_options must be an object")
		}
		if o := v.Get("include_obfuscation"); o.Exists() && !providers.IsBool(o) && o.Type != gjson.Null {
			return invalid("stream_options.include_obfuscation", "include_obfuscation must be a boolean")
		}
	case "include":
		return r.setInclude(v)
	case "metadata":
		return r.setMetadata(v)
	case "user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "service_tier":
		if !null && v.Type != gjson.String {
			return invalid(key, key+" must be a string")
		}
		switch key {
		case "user":
			r.user = v
		case "safety_identifier":
			r.safetyIdentifier = v
		case "prompt_cache_key":
			r.promptCacheKey = v
		case "prompt_cache_retention":
			r.promptCacheRetention = v
		default:
			r.serviceTier = v
		}
	case "truncation":
		switch {
		case null, v.Str == "disabled":
		case v.Str == "auto":
			return providers.UnsupportedBecause("truncation", "truncation auto is not supported: the gateway does not drop input items to fit a model's context; an input too long for the model is refused with context_length_exceeded, as with truncation disabled")
		default:
			return invalid("truncation", "truncation must be auto or disabled")
		}
	case "conversation":
		if !null {
			return providers.UnsupportedBecause("conversation", "conversations are not supported by this gateway; use previous_response_id (with store) or send the whole input")
		}
	case "prompt":
		if !null {
			return providers.UnsupportedBecause("prompt", "prompt templates are stored at OpenAI and cannot be used through this gateway; send instructions and input instead")
		}
	case "context_management":
		if !null && !(v.IsArray() && !v.Get("0").Exists()) {
			return providers.UnsupportedBecause("context_management", "server-side compaction (context_management) is not supported by this gateway")
		}
	case "moderation":
		if !null {
			return providers.UnsupportedBecause("moderation", "moderated responses are not supported by this gateway")
		}
	}
	return nil
}

func (r *Request) setText(v gjson.Result) error {
	if v.Type == gjson.Null {
		return nil
	}
	if !v.IsObject() {
		return invalid("text", "text must be an object")
	}
	r.text = v
	if f := v.Get("format"); f.Exists() && f.Type != gjson.Null {
		if !f.IsObject() {
			return invalid("text.format", "text.format must be an object")
		}
		switch f.Get("type").Str {
		case "text", "json_object":
		case "json_schema":
			if n := f.Get("name"); n.Type != gjson.String || n.Str == "" {
				return invalid("text.format.name", "a json_schema format needs a name")
			}
			if !f.Get("schema").IsObject() {
				return invalid("text.format.schema", "a json_schema format needs a schema object")
			}
			if s := f.Get("strict"); s.Exists() && !providers.IsBool(s) && s.Type != gjson.Null {
				return invalid("text.format.strict", "text.format.strict must be a boolean")
			}
			if d := f.Get("description"); d.Exists() && d.Type != gjson.String && d.Type != gjson.Null {
				return invalid("text.format.description", "text.format.description must be a string")
			}
		default:
			return invalid("text.format.type", "text.format.type must be text, json_object or json_schema")
		}
	}
	switch vb := v.Get("verbosity"); {
	case !vb.Exists(), vb.Type == gjson.Null:
	case vb.Str == "low", vb.Str == "medium", vb.Str == "high":
	default:
		return invalid("text.verbosity", "text.verbosity must be low, medium or high")
	}
	return nil
}

// Reasoning efforts the Responses API accepts.
var efforts = map[string]bool{
	"none": true, "minimal": true, "low": true, "medium": true, "high": true, "xhigh": true, "max": true,
}

func (r *Request) setReasoning(v gjson.Result) error {
	if v.Type == gjson.Null {
		return nil
	}
	if !v.IsObject() {
		return invalid("reasoning", "reasoning must be an object")
	}
	r.reasoning = v
	if e := v.Get("effort"); e.Exists() && e.Type != gjson.Null && !efforts[e.Str] {
		return invalid("reasoning.effort", "reasoning.effort must be none, minimal, low, medium, high, xhigh or max")
	}
	for _, k := range []string{"summary", "generate_summary"} {
		switch s := v.Get(k); {
		case !s.Exists(), s.Type == gjson.Null:
		case s.Str == "auto", s.Str == "concise", s.Str == "detailed":
		default:
			return invalid("reasoning."+k, "reasoning."+k+" must be auto, concise or detailed")
		}
	}
	return nil
}

// setInclude records what include asks for. Values about hosted tools,
// which this gateway refuses anyway, and values it does not know are
// accepted and have no effect.
func (r *Request) setInclude(v gjson.Result) error {
	if v.Type == gjson.Null {
		return nil
	}
	if !v.IsArray() {
		return invalid("include", "include must be an array of strings")
	}
	r.include = v
	i := 0
	var err error
	v.ForEach(func(_, s gjson.Result) bool {
		if s.Type != gjson.String {
			err = invalid("include["+strconv.Itoa(i)+"]", "include values must be strings")
			return false
		}
		switch s.Str {
		case "reasoning.encrypted_content":
			r.includeEncrypted = true
		case "message.output_text.logprobs":
			r.includeLogprobs = true
		}
		i++
		return true
	})
	return err
}

func (r *Request) setMetadata(v gjson.Result) error {
	if v.Type == gjson.Null {
		return nil
	}
	if !v.IsObject() {
		return invalid("metadata", "metadata must be an object of strings")
	}
	n := 0
	var err error
	v.ForEach(func(k, s gjson.Result) bool {
		n++
		switch {
		case n > 16:
			err = invalid("metadata", "metadata may have at most 16 keys")
		case utf8.RuneCountInString(k.Str) > 64:
			err = invalid("metadata", "metadata keys may be at most 64 characters long")
		case s.Type != gjson.String:
			err = invalid("metadata."+k.Str, "metadata values must be strings")
		case utf8.RuneCountInString(s.Str) > 512:
			err = invalid("metadata."+k.Str, "metadata values may be at most 512 characters long")
		}
		return err == nil
	})
	r.metadata = v
	return err
}

// parseTools checks tools and collects the function and custom tools.
func (r *Request) parseTools() error {
	i := 0
	var err error
	r.tools.ForEach(func(_, t gjson.Result) bool {
		err = r.addTool("tools["+strconv.Itoa(i)+"]", t, "", gjson.Result{}, false)
		i++
		return err == nil
	})
	if err != nil {
		return err
	}
	if err := r.addFoundTools(); err != nil {
		return err
	}
	r.send = make([]bool, len(r.toolList))
	for i := range r.send {
		r.send[i] = true
	}
	return nil
}

// addFoundTools adds the tools that tool_search outputs of the input
// made available, so that the model can call them: those the client
// described fully (functions, namespaces, custom tools) that have no
// namespace and name of a tool of the request already.
func (r *Request) addFoundTools() error {
	if !r.input.IsArray() {
		return nil
	}
	var err error
	i := 0
	r.input.ForEach(func(_, it gjson.Result) bool {
		if itemType(it) == "tool_search_output" {
			j := 0
			it.Get("tools").ForEach(func(_, t gjson.Result) bool {
				err = r.addTool("input["+strconv.Itoa(i)+"].tools["+strconv.Itoa(j)+"]", t, "", gjson.Result{}, true)
				j++
				return err == nil
			})
		}
		i++
		return err == nil
	})
	return err
}

// addTool adds the tool v at p; ns and nsDesc are the name and
// description of the namespace it belongs to, if any; found marks a tool
// a tool_search output made available.
func (r *Request) addTool(p string, v gjson.Result, ns string, nsDesc gjson.Result, found bool) error {
	if !v.IsObject() {
		return invalid(p, "each tool must be an object")
	}
	t := tool{v: v, namespace: ns, nsDescription: nsDesc, found: found}
	v.ForEach(func(k, val gjson.Result) bool {
		switch k.Str {
		case "type":
			first(&t.typ, val)
		case "name":
			first(&t.nameV, val)
		case "description":
			first(&t.description, val)
		case "parameters":
			first(&t.parameters, val)
		case "strict":
			first(&t.strict, val)
		case "format":
			first(&t.format, val)
		}
		return true
	})
	typ := t.typ
	if typ.Type != gjson.String {
		return invalid(p+".type", "each tool needs a type")
	}
	if ns != "" && typ.Str != "function" && typ.Str != "custom" {
		return providers.UnsupportedBecause(p+".type", "a namespace may hold function and custom tools, not "+strconv.Quote(typ.Str))
	}
	switch typ.Str {
	case "namespace":
		return r.addNamespace(p, t)
	case "tool_search":
		if ex := v.Get("execution"); ex.Str != "client" {
			// Searched at OpenAI, over tools it keeps: a built-in.
			if found {
				return nil
			}
			r.builtins = append(r.builtins, builtin{param: p, typ: typ.Str, v: v})
			return nil
		}
		if ps := t.parameters; ps.Exists() && !ps.IsObject() && ps.Type != gjson.Null {
			return invalid(p+".parameters", "parameters must be a JSON Schema object")
		}
		if d := t.description; d.Exists() && d.Type != gjson.String && d.Type != gjson.Null {
			return invalid(p+".description", "description must be a string")
		}
		t.search, t.name, t.hub = true, toolSearchName, toolSearchName
		return r.appendTool(p, t)
	case "function":
		if ps := t.parameters; ps.Exists() && !ps.IsObject() && ps.Type != gjson.Null {
			return invalid(p+".parameters", "parameters must be a JSON Schema object")
		}
		if s := t.strict; s.Exists() && !providers.IsBool(s) && s.Type != gjson.Null {
			return invalid(p+".strict", "strict must be a boolean")
		}
	case "custom":
		f := t.format
		switch {
		case !f.Exists(), f.Type == gjson.Null:
		case !f.IsObject():
			return invalid(p+".format", "format must be an object")
		case f.Get("type").Str == "text":
		case f.Get("type").Str == "grammar":
			if s := f.Get("syntax").Str; s != "lark" && s != "regex" {
				return invalid(p+".format.syntax", "a grammar's syntax must be lark or regex")
			}
			if f.Get("definition").Type != gjson.String {
				return invalid(p+".format.definition", "a grammar needs its definition as a string")
			}
		default:
			return invalid(p+".format.type", "a custom tool's format type must be text or grammar")
		}
	default:
		if found {
			return nil // nothing the model could call
		}
		if hostedTools[typ.Str] {
			r.builtins = append(r.builtins, builtin{param: p, typ: typ.Str, v: v})
			return nil
		}
		return providers.UnsupportedBecause(p+".type", "tools of type "+strconv.Quote(typ.Str)+" are not supported; use function, custom or namespace tools")
	}
	if t.nameV.Type != gjson.String || t.nameV.Str == "" {
		return invalid(p+".name", "a "+typ.Str+" tool needs a name")
	}
	if d := t.description; d.Exists() && d.Type != gjson.String && d.Type != gjson.Null {
		return invalid(p+".description", "description must be a string")
	}
	t.custom, t.name, t.hub = typ.Str == "custom", t.nameV.Str, t.nameV.Str
	if ns != "" {
		t.hub = ns + NamespaceSeparator + t.name
	}
	return r.appendTool(p, t)
}

// addNamespace adds the functions of the namespace tool t, at p.
func (r *Request) addNamespace(p string, t tool) error {
	if t.nameV.Type != gjson.String || t.nameV.Str == "" {
		return invalid(p+".name", "a namespace tool needs a name")
	}
	if strings.Contains(t.nameV.Str, NamespaceSeparator) {
		return invalid(p+".name", "a namespace's name may not contain "+strconv.Quote(NamespaceSeparator)+": it joins the namespace and a tool's name for the model's provider")
	}
	if d := t.description; d.Exists() && d.Type != gjson.String && d.Type != gjson.Null {
		return invalid(p+".description", "description must be a string")
	}
	tools := t.v.Get("tools")
	if !tools.IsArray() {
		return invalid(p+".tools", "a namespace tool needs a tools array")
	}
	var err error
	i := 0
	tools.ForEach(func(_, nt gjson.Result) bool {
		err = r.addTool(p+".tools["+strconv.Itoa(i)+"]", nt, t.nameV.Str, t.description, t.found)
		i++
		return err == nil
	})
	return err
}

// appendTool adds t, unless its hub name is taken: then a tool of the
// request is refused (400), a tool a tool_search output made available is
// left out (the request's own, or the one found first, stays).
func (r *Request) appendTool(p string, t tool) error {
	if other := r.hubTool(t.hub); other != nil {
		if t.found {
			return nil
		}
		if other.found {
			*other = t
			return nil
		}
		return invalid(p+".name", "two tools are named "+strconv.Quote(t.hub)+" (a namespace's tool is named <namespace>"+NamespaceSeparator+"<name> for the model's provider)")
	}
	r.toolList = append(r.toolList, t)
	return nil
}

// parseToolChoice checks tool_choice against the tools and works out the
// hub's tool_choice. allowed_tools narrows the tools sent to the provider,
// which every provider can honour.
func (r *Request) parseToolChoice() error {
	c := r.toolChoice
	switch {
	case !c.Exists(), c.Type == gjson.Null:
		return nil
	case c.Type == gjson.String:
		switch c.Str {
		case "none", "auto":
			if len(r.toolList) > 0 {
				r.choice = c.Raw
			}
		case "required":
			if len(r.toolList) == 0 {
				return invalid("tool_choice", "tool_choice required needs tools")
			}
			r.choice = c.Raw
		default:
			return invalid("tool_choice", "tool_choice must be none, auto, required or an object")
		}
		return nil
	}
	switch typ := c.Get("type").Str; typ {
	case "function", "custom":
		name := c.Get("name")
		if name.Type != gjson.String {
			return invalid("tool_choice.name", "tool_choice needs the name of a "+typ+" tool")
		}
		t := r.namedTool(name.Str, c.Get("namespace").Str, typ == "custom")
		if t == nil {
			return invalid("tool_choice.name", "tool_choice names "+strconv.Quote(name.Str)+", which is not a "+typ+" tool of this request")
		}
		w := jsonw.New(make([]byte, 0, 48+len(t.hub)))
		o := w.Object()
		o.Str("type", "function")
		fn := o.Object("function")
		fn.Str("name", t.hub)
		fn.End()
		o.End()
		b, err := w.Finish()
		if err != nil {
			return err
		}
		r.choice = string(b)
	case "allowed_tools":
		mode := c.Get("mode").Str
		if mode != "auto" && mode != "required" {
			return invalid("tool_choice.mode", "allowed_tools mode must be auto or required")
		}
		list := c.Get("tools")
		if !list.IsArray() {
			return invalid("tool_choice.tools", "allowed_tools needs a tools array")
		}
		for i := range r.send {
			r.send[i] = false
		}
		n, j := 0, 0
		var err error
		list.ForEach(func(_, t gjson.Result) bool {
			p := "tool_choice.tools[" + strconv.Itoa(j) + "]"
			j++
			tt := t.Get("type").Str
			if tt != "function" && tt != "custom" {
				err = providers.UnsupportedBecause(p+".type", "allowed_tools may only list function and custom tools")
				return false
			}
			name, ns := t.Get("name").Str, t.Get("namespace").Str
			for i := range r.toolList {
				if k := &r.toolList[i]; k.name == name && k.namespace == ns && !k.search && k.custom == (tt == "custom") {
					if !r.send[i] {
						n++
					}
					r.send[i] = true
					return true
				}
			}
			err = invalid(p+".name", strconv.Quote(name)+" is not a "+tt+" tool of this request")
			return false
		})
		if err != nil {
			return err
		}
		if n == 0 {
			return invalid("tool_choice.tools", "allowed_tools must list at least one tool")
		}
		r.choice = `"` + mode + `"`
	case "":
		return invalid("tool_choice.type", "tool_choice needs a type")
	default:
		return providers.UnsupportedBecause("tool_choice.type", "tool_choice "+strconv.Quote(typ)+" is not supported: it names a built-in tool, which this model's provider cannot run")
	}
	return nil
}

// namedTool returns the function (custom: custom) tool name of the
// namespace ns ("": none), or nil.
func (r *Request) namedTool(name, ns string, custom bool) *tool {
	for i := range r.toolList {
		if t := &r.toolList[i]; t.name == name && t.namespace == ns && !t.search && t.custom == custom {
			return t
		}
	}
	return nil
}

// Roles an input message may have.
var inputRoles = map[string]bool{"user": true, "system": true, "developer": true, "assistant": true}

// itemType is an input item's type; a message may leave it out.
func itemType(it gjson.Result) string {
	if t := it.Get("type"); t.Type == gjson.String {
		return t.Str
	}
	if it.Get("role").Exists() {
		return "message"
	}
	return ""
}

// checkItem checks one input item; p names it (input[3]).
func checkItem(p string, it gjson.Result) error {
	if !it.IsObject() {
		return invalid(p, "each input item must be an object")
	}
	if t := it.Get("type"); t.Exists() && t.Type != gjson.String {
		return invalid(p+".type", "type must be a string")
	}
	switch typ := itemType(it); typ {
	case "message":
		role := it.Get("role")
		if role.Type != gjson.String || !inputRoles[role.Str] {
			return invalid(p+".role", "a message's role must be user, system, developer or assistant")
		}
		return checkContent(p, role.Str, it.Get("content"))
	case "function_call", "custom_tool_call":
		if s := it.Get("call_id"); s.Type != gjson.String || s.Str == "" {
			return invalid(p+".call_id", "a "+typ+" item needs a call_id")
		}
		if s := it.Get("name"); s.Type != gjson.String || s.Str == "" {
			return invalid(p+".name", "a "+typ+" item needs a name")
		}
		field := "arguments"
		if typ == "custom_tool_call" {
			field = "input"
		}
		if s := it.Get(field); s.Type != gjson.String {
			return invalid(p+"."+field, "a "+typ+" item needs "+field+" as a string")
		}
		if ns := it.Get("namespace"); ns.Exists() && ns.Type != gjson.Null && (ns.Type != gjson.String || ns.Str == "") {
			return invalid(p+".namespace", "namespace must be the name of a namespace")
		}
	case "tool_search_call":
		if s := it.Get("call_id"); s.Type != gjson.String || s.Str == "" {
			return invalid(p+".call_id", "a tool_search_call item needs a call_id")
		}
		if a := it.Get("arguments"); a.Exists() && !a.IsObject() && a.Type != gjson.Null {
			return invalid(p+".arguments", "a tool_search_call's arguments must be an object")
		}
	case "tool_search_output":
		if s := it.Get("call_id"); s.Type != gjson.String || s.Str == "" {
			return invalid(p+".call_id", "a tool_search_output item needs a call_id")
		}
		if t := it.Get("tools"); t.Exists() && !t.IsArray() && t.Type != gjson.Null {
			return invalid(p+".tools", "a tool_search_output's tools must be an array")
		}
	case "web_search_call", "compaction":
		// The record of a search OpenAI ran, and history OpenAI compacted
		// and encrypted: no other provider can read either. The answer
		// that followed a search carries what it found.
	case "function_call_output", "custom_tool_call_output":
		if s := it.Get("call_id"); s.Type != gjson.String || s.Str == "" {
			return invalid(p+".call_id", "a "+typ+" item needs a call_id")
		}
		out := it.Get("output")
		switch {
		case out.Type == gjson.String:
		case out.IsArray():
			return checkParts(p+".output", "tool", out)
		default:
			return invalid(p+".output", "output must be a string or an array of content parts")
		}
	case "reasoning":
		s := it.Get("summary")
		if !s.IsArray() {
			return invalid(p+".summary", "a reasoning item needs a summary array")
		}
		for j, part := range s.Array() {
			if part.Get("text").Type != gjson.String {
				return invalid(p+".summary["+strconv.Itoa(j)+"].text", "a summary part needs text")
			}
		}
		if c := it.Get("content"); c.Exists() && c.Type != gjson.Null {
			if !c.IsArray() {
				return invalid(p+".content", "content must be an array")
			}
			for j, part := range c.Array() {
				if part.Get("text").Type != gjson.String {
					return invalid(p+".content["+strconv.Itoa(j)+"].text", "a reasoning content part needs text")
				}
			}
		}
		if e := it.Get("encrypted_content"); e.Exists() && e.Type != gjson.String && e.Type != gjson.Null {
			return invalid(p+".encrypted_content", "encrypted_content must be a string")
		}
	case "item_reference":
		if s := it.Get("id"); s.Type != gjson.String || s.Str == "" {
			return invalid(p+".id", "an item_reference needs the id of an item")
		}
	case "":
		return invalid(p+".type", "each input item needs a type (or a role, for a message)")
	default:
		return providers.UnsupportedBecause(p+".type", "input items of type "+strconv.Quote(typ)+" are not supported: they belong to built-in tools or server features this model's provider does not have")
	}
	return nil
}

// checkContent checks a message's content for role.
func checkContent(p, role string, c gjson.Result) error {
	switch {
	case c.Type == gjson.String:
		return nil
	case c.IsArray():
		return checkParts(p+".content", role, c)
	case !c.Exists():
		return invalid(p+".content", "a message needs content")
	default:
		return invalid(p+".content", "content must be a string or an array of content parts")
	}
}

// checkParts checks content parts; role is the message's role, or "tool"
// for the output of a tool call.
func checkParts(p, role string, parts gjson.Result) error {
	j := 0
	var err error
	parts.ForEach(func(_, part gjson.Result) bool {
		pp := p + "[" + strconv.Itoa(j) + "]"
		j++
		err = checkPart(pp, role, part)
		return err == nil
	})
	return err
}

func checkPart(pp, role string, part gjson.Result) error {
	if !part.IsObject() || part.Get("type").Type != gjson.String {
		return invalid(pp, "each content part must be an object with a type")
	}
	typ := part.Get("type").Str
	switch typ {
	case "input_text", "output_text":
		if part.Get("text").Type != gjson.String {
			return invalid(pp+".text", "a "+typ+" part needs text")
		}
	case "refusal":
		if role != "assistant" {
			return invalid(pp+".type", "refusal parts are only allowed in assistant messages")
		}
		if part.Get("refusal").Type != gjson.String {
			return invalid(pp+".refusal", "a refusal part needs refusal")
		}
	case "input_image":
		if role != "user" && role != "tool" {
			return invalid(pp+".type", "input_image parts are only allowed in user messages and tool outputs")
		}
		if f := part.Get("file_id"); f.Type == gjson.String && f.Str != "" {
			return providers.UnsupportedBecause(pp+".file_id", "images by file_id are not supported: the gateway's files are batch inputs; send the image as a data: URL or an https URL in image_url")
		}
		if u := part.Get("image_url"); u.Type != gjson.String || u.Str == "" {
			return invalid(pp+".image_url", "an input_image part needs image_url")
		}
		if d := part.Get("detail"); d.Exists() && d.Type != gjson.String && d.Type != gjson.Null {
			return invalid(pp+".detail", "detail must be a string")
		}
	case "input_file":
		if role != "user" && role != "tool" {
			return invalid(pp+".type", "input_file parts are only allowed in user messages and tool outputs")
		}
		if f := part.Get("file_id"); f.Type == gjson.String && f.Str != "" {
			return providers.UnsupportedBecause(pp+".file_id", "files by file_id are not supported: the gateway's files are batch inputs; send the file's content in file_data")
		}
		if f := part.Get("file_url"); f.Type == gjson.String && f.Str != "" {
			return providers.UnsupportedBecause(pp+".file_url", "files by file_url are not supported; send the file's content in file_data")
		}
		if f := part.Get("file_data"); f.Type != gjson.String || f.Str == "" {
			return invalid(pp+".file_data", "an input_file part needs file_data")
		}
		if f := part.Get("filename"); f.Exists() && f.Type != gjson.String && f.Type != gjson.Null {
			return invalid(pp+".filename", "filename must be a string")
		}
	default:
		return invalid(pp+".type", "unknown content part type "+strconv.Quote(typ))
	}
	return nil
}
