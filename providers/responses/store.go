package responses

import (
	"net/url"
	"slices"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Stored records (Exchange.Record) are {"input":[items],"response":{…}}:
// the input items of the whole conversation up to this response, each
// with an id and a status, as OpenAI lists them, and the Response with
// every reasoning item's encrypted_content.

// History returns the conversation a stored response ends: its input items
// and then its output items, as a JSON array of input items for
// Translator.New (previous_response_id).
func History(record []byte) ([]byte, error) {
	in, out, ok := recordParts(record)
	if !ok {
		return nil, storedError()
	}
	w := jsonw.New(make([]byte, 0, len(in.Raw)+len(out.Raw)+2))
	a := w.Array()
	for _, arr := range []gjson.Result{in, out} {
		arr.ForEach(func(_, it gjson.Result) bool {
			a.Compact(it.Raw)
			return true
		})
	}
	a.End()
	return w.Finish()
}

// recordParts returns a record's input items and its response's output
// items.
func recordParts(record []byte) (in, out gjson.Result, ok bool) {
	if !providers.ValidJSON(record) {
		return in, out, false
	}
	root := gjson.ParseBytes(record)
	in, out = root.Get("input"), root.Get("response.output")
	return in, out, in.IsArray() && out.IsArray()
}

// StoredResponse returns the Response of a stored record for
// GET /v1/responses/{id}. Reasoning items keep their encrypted_content
// only when include asks for reasoning.encrypted_content.
func StoredResponse(record []byte, include []string) ([]byte, error) {
	if !providers.ValidJSON(record) {
		return nil, storedError()
	}
	resp := gjson.GetBytes(record, "response")
	if !resp.IsObject() {
		return nil, storedError()
	}
	body := []byte(resp.Raw)
	if slices.Contains(include, "reasoning.encrypted_content") {
		return body, nil
	}
	out := resp.Get("output")
	strip := false
	out.ForEach(func(_, it gjson.Result) bool {
		strip = it.Get("encrypted_content").Exists()
		return !strip
	})
	if !strip {
		return body, nil
	}
	w := jsonw.New(make([]byte, 0, len(out.Raw)))
	a := w.Array()
	out.ForEach(func(_, it gjson.Result) bool {
		writeFiltered(a.Value(), it, false, true)
		return true
	})
	a.End()
	b, err := w.Finish()
	if err != nil {
		return nil, err
	}
	body, err = sjson.SetRawBytes(body, "output", b)
	if err != nil {
		return nil, storedError()
	}
	return body, nil
}

// writeFiltered writes item without the encrypted_content of a reasoning
// item (unless encrypted) and without input images' URLs (unless images).
func writeFiltered(v jsonw.Value, it gjson.Result, encrypted, images bool) {
	raw := it.Raw
	if !encrypted && it.Get("encrypted_content").Exists() {
		if s, err := sjson.Delete(raw, "encrypted_content"); err == nil {
			raw = s
		}
	}
	if !images && it.Get("type").Str == "message" {
		it = gjson.Parse(raw)
		i := 0
		it.Get("content").ForEach(func(_, part gjson.Result) bool {
			if part.Get("type").Str == "input_image" && part.Get("image_url").Exists() {
				if s, err := sjson.Delete(raw, "content."+strconv.Itoa(i)+".image_url"); err == nil {
					raw = s
				}
			}
			i++
			return true
		})
	}
	v.Compact(raw)
}

// ListParams are the query parameters of GET /v1/responses/{id}/input_items.
type ListParams struct {
	Limit   int      // 1–100; 0 means 20
	Order   string   // "asc" or "desc"; "" means desc, as OpenAI's default
	After   string   // list the items after the item with this id
	Include []string // reasoning.encrypted_content, message.input_image.image_url
}

// ParseListParams reads the list parameters from a query string, as the
// OpenAI SDKs send them (include[]=…).
func ParseListParams(q url.Values) (ListParams, error) {
	p := ListParams{Order: q.Get("order"), After: q.Get("after")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			return p, invalid("limit", "limit must be an integer from 1 to 100")
		}
		p.Limit = n
	}
	switch p.Order {
	case "", "asc", "desc":
	default:
		return p, invalid("order", "order must be asc or desc")
	}
	p.Include = append(q["include[]"], q["include"]...)
	return p, nil
}

// InputItems answers GET /v1/responses/{id}/input_items from a stored
// record: OpenAI's list shape, {"object":"list","data":[…],"first_id",
// "last_id","has_more"}, newest first unless Order is asc. The items are
// those of the whole conversation the response was made from, the earlier
// responses' inputs and outputs included.
func InputItems(record []byte, p ListParams) ([]byte, error) {
	in, _, ok := recordParts(record)
	if !ok {
		return nil, storedError()
	}
	items := in.Array()
	if p.Order != "asc" {
		slices.Reverse(items)
	}
	start := 0
	if p.After != "" {
		start = -1
		for i, it := range items {
			if it.Get("id").Str == p.After {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return nil, invalid("after", "no input item with id "+strconv.Quote(p.After))
		}
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 20
	}
	end := min(start+limit, len(items))
	page := items[start:end]

	encrypted := slices.Contains(p.Include, "reasoning.encrypted_content")
	images := slices.Contains(p.Include, "message.input_image.image_url")
	w := jsonw.New(make([]byte, 0, len(in.Raw)/max(1, len(items))*len(page)+96))
	o := w.Object()
	o.Str("object", "list")
	data := o.Array("data")
	for _, it := range page {
		writeFiltered(data.Value(), it, encrypted, images)
	}
	data.End()
	if len(page) == 0 {
		o.Null("first_id")
		o.Null("last_id")
	} else {
		o.Str("first_id", page[0].Get("id").Str)
		o.Str("last_id", page[len(page)-1].Get("id").Str)
	}
	o.Bool("has_more", end < len(items))
	o.End()
	return w.Finish()
}

// idPrefix is the id prefix of an item type.
func idPrefix(typ string) string {
	switch typ {
	case "message":
		return "msg_"
	case "function_call":
		return "fc_"
	case "function_call_output":
		return "fco_"
	case "custom_tool_call":
		return "ctc_"
	case "custom_tool_call_output":
		return "ctco_"
	case "reasoning":
		return "rs_"
	case "tool_search_call":
		return "tsc_"
	case "tool_search_output":
		return "tso_"
	}
	return "item_"
}

// writeNormalized writes an input item as OpenAI lists it: with an id
// (its own, or a new one), a status, and a message's content as parts.
// item has been checked by checkItem.
func (x *Exchange) writeNormalized(v jsonw.Value, it gjson.Result, typ string) {
	o := v.Object()
	if id := it.Get("id"); id.Type == gjson.String && id.Str != "" {
		o.Raw("id", id.Raw)
	} else {
		o.Str("id", x.t.newID(idPrefix(typ)))
	}
	o.Str("type", typ)
	switch typ {
	case "message":
		role := it.Get("role")
		o.Raw("role", role.Raw)
		o.Str("status", "completed")
		parts := o.Array("content")
		assistant := role.Str == "assistant"
		content := it.Get("content")
		if content.Type == gjson.String {
			writeTextPart(parts, assistant, content.Raw)
		} else {
			content.ForEach(func(_, part gjson.Result) bool {
				switch part.Get("type").Str {
				case "input_text", "output_text":
					writeTextPart(parts, assistant, part.Get("text").Raw)
				case "input_image":
					p := parts.Object()
					p.Str("type", "input_image")
					if d := part.Get("detail"); d.Type == gjson.String {
						p.Raw("detail", d.Raw)
					} else {
						p.Str("detail", "auto")
					}
					p.Compact("image_url", part.Get("image_url").Raw)
					p.End()
				default: // input_file, refusal
					parts.Compact(part.Raw)
				}
				return true
			})
		}
		parts.End()
	case "function_call", "custom_tool_call":
		o.Str("status", "completed")
		o.Raw("call_id", it.Get("call_id").Raw)
		o.Raw("name", it.Get("name").Raw)
		if ns := it.Get("namespace"); ns.Type == gjson.String {
			o.Raw("namespace", ns.Raw)
		}
		if typ == "function_call" {
			o.Compact("arguments", it.Get("arguments").Raw)
		} else {
			o.Compact("input", it.Get("input").Raw)
		}
	case "tool_search_call", "tool_search_output":
		o.Str("status", "completed")
		o.Raw("call_id", it.Get("call_id").Raw)
		o.Str("execution", "client")
		if typ == "tool_search_call" {
			if a := it.Get("arguments"); a.IsObject() {
				o.Compact("arguments", a.Raw)
			} else {
				o.Object("arguments").End()
			}
		} else if t := it.Get("tools"); t.IsArray() {
			o.Compact("tools", t.Raw)
		} else {
			o.Array("tools").End()
		}
	case "web_search_call", "compaction":
		it.ForEach(func(k, v gjson.Result) bool {
			if k.Str != "id" && k.Str != "type" {
				o.Compact(k.Str, v.Raw)
			}
			return true
		})
	case "function_call_output", "custom_tool_call_output":
		o.Str("status", "completed")
		o.Raw("call_id", it.Get("call_id").Raw)
		o.Compact("output", it.Get("output").Raw)
	case "reasoning":
		o.Compact("summary", it.Get("summary").Raw)
		if c := it.Get("content"); c.IsArray() {
			o.Compact("content", c.Raw)
		}
		if e := it.Get("encrypted_content"); e.Type == gjson.String {
			o.Raw("encrypted_content", e.Raw)
		}
	}
	o.End()
}

// writeTextPart writes a stored message's text part: input_text, or
// output_text with no annotations for the assistant's; text is raw JSON.
func writeTextPart(parts jsonw.Array, assistant bool, text string) {
	p := parts.Object()
	if assistant {
		p.Str("type", "output_text")
		p.Array("annotations").End()
	} else {
		p.Str("type", "input_text")
	}
	p.Compact("text", text)
	p.End()
}

// maxIncludes bounds the include[] values of a stored-response request.
const maxIncludes = 16

// StoredQuery is the query string the gateway sends to the provider that
// stores a passed-through response, for GET /v1/responses/{id} (items
// false) or GET /v1/responses/{id}/input_items (items true), made from q,
// the client's query: only the parameters the gateway knows — include[]
// for both, limit, order and after for the items — each checked and
// written anew. Anything else the client sent stays with the gateway, so
// that no parameter it does not know (a credential, an option the
// provider honours and the gateway would not pass on) reaches the
// provider. stream=true is refused (400 unsupported_parameter): the
// gateway does not replay a stored response as a stream.
func StoredQuery(q url.Values, items bool) (string, error) {
	out := url.Values{}
	include := append(q["include[]"], q["include"]...)
	if len(include) > maxIncludes {
		return "", invalid("include", "include takes at most "+strconv.Itoa(maxIncludes)+" values")
	}
	for _, v := range include {
		if !includeValue(v) {
			return "", invalid("include", "include "+strconv.Quote(v)+" is not a field path such as reasoning.encrypted_content")
		}
		out.Add("include[]", v)
	}
	if !items {
		if s := q.Get("stream"); s != "" && s != "false" {
			return "", providers.UnsupportedBecause("stream", "a stored response is returned whole: stream is not supported")
		}
		return out.Encode(), nil
	}
	p, err := ParseListParams(q)
	if err != nil {
		return "", err
	}
	if p.Limit > 0 {
		out.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Order != "" {
		out.Set("order", p.Order)
	}
	if p.After != "" {
		if !itemID(p.After) {
			return "", invalid("after", "after "+strconv.Quote(p.After)+" is not an item id")
		}
		out.Set("after", p.After)
	}
	return out.Encode(), nil
}

// includeValue reports whether v reads as an include value: a dotted
// path of lower-case words, such as reasoning.encrypted_content.
func includeValue(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// itemID reports whether id reads as the id of an item (msg_…, fc_…).
func itemID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
