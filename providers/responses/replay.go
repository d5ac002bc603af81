package responses

import (
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Replay appends to dst the Responses event stream of a complete
// Response, response (status completed or incomplete): what a client
// would have read had it been streamed. response.created and
// response.in_progress carry the Response in progress, without output or
// usage; each output item follows in turn, opened by
// response.output_item.added and closed by response.output_item.done with
// the item whole, and between them its content whole in one delta each —
// a message's text parts (output_text delta, annotations, done) and
// refusals, a reasoning item's summary parts and text, a function call's
// arguments, a custom tool call's input; an item of another kind (a
// hosted tool's call) is added and done whole. response.completed (or
// response.incomplete) ends it with the Response as stored. A response
// cache replays a stored answer so to a request that asks for a stream.
// Anything else is an error, and nothing is appended.
func Replay(dst, response []byte) ([]byte, error) {
	if !providers.ValidJSON(response) {
		return dst, errNotResponse
	}
	r := gjson.ParseBytes(response)
	status := r.Get("status").Str
	output := r.Get("output")
	if !r.IsObject() || r.Get("object").Str != "response" || !output.IsArray() || status != "completed" && status != "incomplete" {
		return dst, errNotResponse
	}
	var s Stream
	out := dst
	for _, typ := range []string{"response.created", "response.in_progress"} {
		w := s.begin(out, typ)
		o := s.head(&w, typ)
		inProgress(o.Object("response"), r)
		out = s.end(&w, o, out)
	}
	k := int64(0)
	output.ForEach(func(_, item gjson.Result) bool {
		out = s.replayItem(out, k, item)
		k++
		return true
	})
	typ := "response." + status
	w := s.begin(out, typ)
	o := s.head(&w, typ)
	o.Compact("response", r.Raw)
	out = s.end(&w, o, out)
	return out, nil
}

var errNotResponse = &providers.Error{Status: 500, Type: "server_error", Code: "internal_error",
	Message: "the stored answer is not a complete Response"}

// inProgress writes the members of r into o as a Response still in
// progress has them: status in_progress, no output, no usage, and nothing
// of its end.
func inProgress(o jsonw.Object, r gjson.Result) {
	r.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "status":
			o.Str("status", "in_progress")
		case "output":
			o.Array("output").End()
		case "usage", "completed_at", "incomplete_details":
			o.Null(k.Str)
		default:
			o.Compact(k.Str, v.Raw)
		}
		return true
	})
	o.End()
}

// itemRef writes item_id and output_index.
func itemRef(o jsonw.Object, id gjson.Result, k int64) {
	o.Text("item_id", jsonw.StrOf(id))
	o.Int("output_index", k)
}

// replayItem appends the events of output item k.
func (s *Stream) replayItem(dst []byte, k int64, item gjson.Result) []byte {
	typ := item.Get("type").Str
	id := item.Get("id")
	// The item as it is added: what it holds emptied (its text, summary,
	// arguments, input), in progress; an item of another kind whole.
	const added = "response.output_item.added"
	w := s.begin(dst, added)
	o := s.head(&w, added)
	o.Int("output_index", k)
	it := o.Object("item")
	item.ForEach(func(key, v gjson.Result) bool {
		switch {
		case key.Str == "content" && typ == "message", key.Str == "summary" && typ == "reasoning",
			key.Str == "content" && typ == "reasoning":
			it.Array(key.Str).End()
		case key.Str == "encrypted_content" && typ == "reasoning":
		case key.Str == "arguments" && typ == "function_call", key.Str == "input" && typ == "custom_tool_call":
			it.Str(key.Str, "")
		case key.Str == "status" && (typ == "message" || typ == "function_call" || typ == "custom_tool_call"):
			it.Str("status", "in_progress")
		default:
			it.Compact(key.Str, v.Raw)
		}
		return true
	})
	it.End()
	dst = s.end(&w, o, dst)

	switch typ {
	case "message":
		j := int64(0)
		item.Get("content").ForEach(func(_, part gjson.Result) bool {
			dst = s.replayPart(dst, id, k, j, part)
			j++
			return true
		})
	case "reasoning":
		j := int64(0)
		item.Get("summary").ForEach(func(_, part gjson.Result) bool {
			dst = s.replaySummary(dst, id, k, j, part)
			j++
			return true
		})
		j = 0
		item.Get("content").ForEach(func(_, part gjson.Result) bool {
			text := part.Get("text")
			dst = s.replayText(dst, id, k, "content_index", j, "response.reasoning_text.delta", "delta", text)
			dst = s.replayText(dst, id, k, "content_index", j, "response.reasoning_text.done", "text", text)
			j++
			return true
		})
	case "function_call":
		args := item.Get("arguments")
		if args.Str != "" {
			dst = s.replayText(dst, id, k, "", 0, "response.function_call_arguments.delta", "delta", args)
		}
		const done = "response.function_call_arguments.done"
		w := s.begin(dst, done)
		o := s.head(&w, done)
		itemRef(o, id, k)
		o.Text("name", jsonw.StrOf(item.Get("name")))
		o.Text("arguments", jsonw.StrOf(args))
		dst = s.end(&w, o, dst)
	case "custom_tool_call":
		input := item.Get("input")
		if input.Str != "" {
			dst = s.replayText(dst, id, k, "", 0, "response.custom_tool_call_input.delta", "delta", input)
		}
		dst = s.replayText(dst, id, k, "", 0, "response.custom_tool_call_input.done", "input", input)
	}

	const done = "response.output_item.done"
	w = s.begin(dst, done)
	o = s.head(&w, done)
	o.Int("output_index", k)
	o.Compact("item", item.Raw)
	return s.end(&w, o, dst)
}

// replayText appends an event typ of item k with the string text under
// key, and index (under name, unless name is "") when the event names a
// part.
func (s *Stream) replayText(dst []byte, id gjson.Result, k int64, name string, index int64, typ, key string, text gjson.Result) []byte {
	w := s.begin(dst, typ)
	o := s.head(&w, typ)
	itemRef(o, id, k)
	if name != "" {
		o.Int(name, index)
	}
	o.Text(key, jsonw.StrOf(text))
	return s.end(&w, o, dst)
}

// replayPart appends the events of part j of message k: added (empty),
// its text or refusal in one delta, its annotations, done, and the part
// done whole.
func (s *Stream) replayPart(dst []byte, id gjson.Result, k, j int64, part gjson.Result) []byte {
	typ := part.Get("type").Str
	ref := func(o jsonw.Object) {
		itemRef(o, id, k)
		o.Int("content_index", j)
	}
	const added = "response.content_part.added"
	w := s.begin(dst, added)
	o := s.head(&w, added)
	ref(o)
	p := o.Object("part")
	switch typ {
	case "output_text":
		p.Str("type", "output_text")
		p.Str("text", "")
		p.Array("annotations").End()
		p.Array("logprobs").End()
	case "refusal":
		p.Str("type", "refusal")
		p.Str("refusal", "")
	default:
		part.ForEach(func(key, v gjson.Result) bool {
			p.Compact(key.Str, v.Raw)
			return true
		})
	}
	p.End()
	dst = s.end(&w, o, dst)

	switch typ {
	case "output_text":
		text, logprobs := part.Get("text"), part.Get("logprobs")
		lp := func(o jsonw.Object) {
			if logprobs.IsArray() {
				o.Compact("logprobs", logprobs.Raw)
			} else {
				o.Array("logprobs").End()
			}
		}
		const delta = "response.output_text.delta"
		w := s.begin(dst, delta)
		o := s.head(&w, delta)
		ref(o)
		o.Text("delta", jsonw.StrOf(text))
		lp(o)
		dst = s.end(&w, o, dst)
		a := int64(0)
		part.Get("annotations").ForEach(func(_, an gjson.Result) bool {
			const typ = "response.output_text.annotation.added"
			w := s.begin(dst, typ)
			o := s.head(&w, typ)
			ref(o)
			o.Int("annotation_index", a)
			o.Compact("annotation", an.Raw)
			dst = s.end(&w, o, dst)
			a++
			return true
		})
		const done = "response.output_text.done"
		w = s.begin(dst, done)
		o = s.head(&w, done)
		ref(o)
		o.Text("text", jsonw.StrOf(text))
		lp(o)
		dst = s.end(&w, o, dst)
	case "refusal":
		refusal := part.Get("refusal")
		dst = s.replayText(dst, id, k, "content_index", j, "response.refusal.delta", "delta", refusal)
		dst = s.replayText(dst, id, k, "content_index", j, "response.refusal.done", "refusal", refusal)
	}

	const done = "response.content_part.done"
	w = s.begin(dst, done)
	o = s.head(&w, done)
	ref(o)
	o.Compact("part", part.Raw)
	return s.end(&w, o, dst)
}

// replaySummary appends the events of summary part j of reasoning item k.
func (s *Stream) replaySummary(dst []byte, id gjson.Result, k, j int64, part gjson.Result) []byte {
	text := part.Get("text")
	const added = "response.reasoning_summary_part.added"
	w := s.begin(dst, added)
	o := s.head(&w, added)
	itemRef(o, id, k)
	o.Int("summary_index", j)
	writeSummaryText(o.Key("part"), nil)
	dst = s.end(&w, o, dst)
	dst = s.replayText(dst, id, k, "summary_index", j, "response.reasoning_summary_text.delta", "delta", text)
	dst = s.replayText(dst, id, k, "summary_index", j, "response.reasoning_summary_text.done", "text", text)
	const done = "response.reasoning_summary_part.done"
	w = s.begin(dst, done)
	o = s.head(&w, done)
	itemRef(o, id, k)
	o.Int("summary_index", j)
	o.Compact("part", part.Raw)
	return s.end(&w, o, dst)
}
