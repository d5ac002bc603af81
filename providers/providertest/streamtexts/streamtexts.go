// Package streamtexts reads the texts a streamed answer's events carry,
// for tests that hold a guarded stream to what the provider sent: each
// text (a choice's content, a tool call's arguments, a Messages block, a
// Responses part) as the concatenation of its pieces, as a client reads
// them.
package streamtexts

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/sse"
)

// Texts are the texts the events of api ("chat", "responses" or
// "messages") carry, by the text each piece belongs to, each the
// concatenation of its pieces as gjson reads them; each byte that is not
// UTF-8 reads as U+FFFD, as a JSON decoder reads it. An event that is not
// JSON carries none.
func Texts(api string, events [][]byte) map[string]string {
	texts := make(map[string]string)
	walk(api, events, func(key, piece string) { texts[key] += piece }, func(func(string) bool) {})
	return texts
}

// Reopened reports whether a text of the events gets a piece after the
// event that ended it (a chat choice's finish_reason or, for its content
// and refusal, its first tool call, a block's
// content_block_stop, a part's .done, the end of the message or
// response): a guard reads such a piece as a text of its own.
func Reopened(api string, events [][]byte) bool {
	seen, ended := make(map[string]bool), make(map[string]bool)
	reopened := false
	walk(api, events, func(key, _ string) {
		reopened = reopened || ended[key]
		seen[key] = true
	}, func(ends func(string) bool) {
		for k := range seen {
			if ends(k) {
				ended[k] = true
			}
		}
	})
	return reopened
}

// walk calls piece for each string of text the events carry, in order,
// with the key of its text, and end with a test of the keys an event ends,
// after its pieces.
func walk(api string, events [][]byte, piece func(key, piece string), end func(func(key string) bool)) {
	add := func(key string, v gjson.Result) {
		if v.Type == gjson.String {
			piece(key, string([]rune(v.Str)))
		}
	}
	for _, ev := range events {
		if !gjson.ValidBytes(ev) {
			continue
		}
		root := gjson.ParseBytes(ev)
		switch api {
		case "chat":
			root.Get("choices").ForEach(func(_, c gjson.Result) bool {
				i := strconv.FormatInt(c.Get("index").Int(), 10) // none: 0
				c.Get("delta").ForEach(func(k, v gjson.Result) bool {
					switch k.Str {
					case "content", "refusal":
						add(k.Str+i, v)
					case "tool_calls":
						// A choice's tool calls end its text.
						end(func(key string) bool { return key == "content"+i || key == "refusal"+i })
						v.ForEach(func(_, tc gjson.Result) bool {
							add("arguments"+i+"."+strconv.FormatInt(tc.Get("index").Int(), 10), tc.Get("function.arguments"))
							return true
						})
					}
					return true
				})
				if c.Get("finish_reason").Type == gjson.String {
					end(func(key string) bool {
						return key == "content"+i || key == "refusal"+i || strings.HasPrefix(key, "arguments"+i+".")
					})
				}
				return true
			})
		case "messages":
			i := strconv.FormatInt(root.Get("index").Int(), 10)
			switch root.Get("type").Str {
			case "content_block_delta":
				if root.Get("delta.type").Str == "input_json_delta" {
					add("json"+i, root.Get("delta.partial_json"))
				} else {
					add("text"+i, root.Get("delta.text"))
				}
			case "content_block_start":
				add("text"+i, root.Get("content_block.text"))
			case "content_block_stop":
				end(func(key string) bool { return key == "text"+i || key == "json"+i })
			case "message_stop":
				end(func(string) bool { return true })
			}
		case "responses":
			typ := root.Get("type").Str
			part := strconv.FormatInt(root.Get("output_index").Int(), 10) + "." + strconv.FormatInt(root.Get("content_index").Int(), 10)
			switch typ {
			case "response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta":
				add(typ+part, root.Get("delta"))
			case "response.output_text.done", "response.refusal.done", "response.function_call_arguments.done":
				key := strings.TrimSuffix(typ, ".done") + ".delta" + part
				end(func(k string) bool { return k == key })
			case "response.completed", "response.incomplete", "response.failed":
				end(func(string) bool { return true })
			}
		}
	}
}

// A Repeat is a whole text that a Responses event repeats (a part's
// .done, an item's response.output_item.done, the response's
// response.completed), by the key of its deltas in Texts.
type Repeat struct {
	Key, Text string
}

// Repeats are the whole texts the Responses events repeat, in their
// order.
func Repeats(events [][]byte) []Repeat {
	var out []Repeat
	add := func(key string, v gjson.Result) {
		if v.Type == gjson.String {
			out = append(out, Repeat{Key: key, Text: string([]rune(v.Str))})
		}
	}
	index := func(v gjson.Result) string { return strconv.FormatInt(v.Int(), 10) }
	item := func(output string, it gjson.Result) {
		switch it.Get("type").Str {
		case "message":
			it.Get("content").ForEach(func(j, c gjson.Result) bool {
				switch c.Get("type").Str {
				case "output_text":
					add("response.output_text.delta"+output+"."+index(j), c.Get("text"))
				case "refusal":
					add("response.refusal.delta"+output+"."+index(j), c.Get("refusal"))
				}
				return true
			})
		case "function_call":
			add("response.function_call_arguments.delta"+output+".0", it.Get("arguments"))
		}
	}
	for _, ev := range events {
		if !gjson.ValidBytes(ev) {
			continue
		}
		root := gjson.ParseBytes(ev)
		part := index(root.Get("output_index")) + "." + index(root.Get("content_index"))
		switch typ := root.Get("type").Str; typ {
		case "response.output_text.done":
			add("response.output_text.delta"+part, root.Get("text"))
		case "response.refusal.done":
			add("response.refusal.delta"+part, root.Get("refusal"))
		case "response.function_call_arguments.done":
			add("response.function_call_arguments.delta"+part, root.Get("arguments"))
		case "response.content_part.done":
			if root.Get("part.type").Str == "output_text" {
				add("response.output_text.delta"+part, root.Get("part.text"))
			}
		case "response.output_item.done":
			item(index(root.Get("output_index")), root.Get("item"))
		case "response.completed", "response.incomplete", "response.failed":
			root.Get("response.output").ForEach(func(o, it gjson.Result) bool {
				item(index(o), it)
				return true
			})
		}
	}
	return out
}

// Differ returns the first text (in either) that want and got do not
// hold alike, a text one of them lacks reading as empty.
func Differ(want, got map[string]string) (key string, differ bool) {
	for _, m := range []map[string]string{want, got} {
		for k := range m {
			if want[k] != got[k] {
				return k, true
			}
		}
	}
	return "", false
}

// Readable reports whether every event that begins as a JSON object is
// one, without a name twice in an object. What a guard does with the
// texts of one that is not is its own: a client's JSON parser refuses
// it (ending its stream), or reads one of the two values and another
// parser the other. Such a stream has no texts to compare.
func Readable(events [][]byte) bool {
	for _, ev := range events {
		if len(ev) > 0 && ev[0] == '{' && (!gjson.ValidBytes(ev) || !unique(gjson.ParseBytes(ev))) {
			return false
		}
	}
	return true
}

// unique reports whether no object in v has a name twice.
func unique(v gjson.Result) bool {
	ok := true
	switch {
	case v.IsObject():
		seen := make(map[string]bool)
		v.ForEach(func(k, m gjson.Result) bool {
			ok = !seen[k.Str] && unique(m)
			seen[k.Str] = true
			return ok
		})
	case v.IsArray():
		v.ForEach(func(_, m gjson.Result) bool {
			ok = unique(m)
			return ok
		})
	}
	return ok
}

// Data is the data of each event of a stream of server-sent events, as a
// client reads it: an event that ends without its blank line (the
// stream's last) included.
func Data(stream []byte) [][]byte {
	var out [][]byte
	for {
		ev, rest, ok := sse.Cut(stream)
		if !ok {
			break
		}
		_, data := sse.Fields(ev)
		out = append(out, data)
		stream = rest
	}
	if len(stream) > 0 {
		_, data := sse.Fields(stream)
		out = append(out, data)
	}
	return out
}
