package responses

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
)

// requiredProblems walks a value openai-go decoded and reports, by JSON
// path, every field the SDK marks required (api:"required") that the JSON
// lacked, every field present with a value of the wrong type, and every
// union whose variant the SDK does not know. Unknown fields are fine.
func requiredProblems(v any) []string {
	var problems []string
	walkRequired("$", reflect.ValueOf(v), &problems)
	return problems
}

var fieldType = reflect.TypeFor[respjson.Field]()

func walkRequired(path string, v reflect.Value, problems *[]string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkRequired(path, v.Elem(), problems)
		}
		return
	case reflect.Slice:
		for i := range v.Len() {
			walkRequired(path+"["+itoa(i)+"]", v.Index(i), problems)
		}
		return
	case reflect.Struct:
	default:
		return
	}
	// ResponseItemUnion.AsAny takes every message for an output message;
	// an input message (user, system, developer) is its AsMessage variant.
	if it, ok := v.Interface().(responses.ResponseItemUnion); ok && it.Type == "message" && it.Role != "assistant" {
		walkRequired(path, reflect.ValueOf(it.AsMessage()), problems)
		return
	}
	// A discriminated union: check the variant its type names.
	if m := v.MethodByName("AsAny"); m.IsValid() && m.Type().NumIn() == 0 {
		variant := m.Call(nil)[0]
		if variant.IsNil() {
			typ := v.FieldByName("Type")
			*problems = append(*problems, path+": union of unknown type "+strings.TrimSpace(typ.String()))
			return
		}
		walkRequired(path, variant.Elem(), problems)
		return
	}
	meta := v.FieldByName("JSON")
	if !meta.IsValid() || meta.Kind() != reflect.Struct {
		return
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Name == "JSON" {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		m := meta.FieldByName(f.Name)
		if !m.IsValid() || m.Type() != fieldType {
			continue
		}
		field := m.Interface().(respjson.Field)
		raw := field.Raw()
		p := path + "." + name
		switch {
		case raw == respjson.Omitted:
			if strings.Contains(f.Tag.Get("api"), "required") {
				*problems = append(*problems, p+": required but missing")
			}
			continue
		case raw == respjson.Null:
			continue
		case !field.Valid():
			*problems = append(*problems, p+": wrong type: "+raw)
			continue
		}
		walkRequired(p, v.Field(i), problems)
	}
}

func itoa(i int) string { return string(appendInt(nil, i)) }

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

// decodeResponse decodes a Response with openai-go and fails the test on
// a missing required field or a value of the wrong type.
func decodeResponse(t testing.TB, data []byte) responses.Response {
	t.Helper()
	var r responses.Response
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("openai-go cannot decode the Response: %v\n%s", err, data)
	}
	if p := requiredProblems(r); len(p) > 0 {
		t.Fatalf("the Response does not satisfy openai-go's responses.Response:\n  %s\n%s", strings.Join(p, "\n  "), data)
	}
	if r.Object != "response" {
		t.Fatalf("object = %q", r.Object)
	}
	return r
}

// sseEvent is one server-sent event of a Responses stream.
type sseEvent struct {
	name string
	data []byte
}

// splitEvents cuts a Responses stream into its events, failing on any
// event that is not an event: line followed by one data: line.
func splitEvents(t testing.TB, stream []byte) []sseEvent {
	t.Helper()
	if len(stream) > 0 && !bytes.HasSuffix(stream, []byte("\n\n")) {
		t.Fatalf("the stream does not end with a blank line:\n%s", stream)
	}
	var events []sseEvent
	for _, block := range bytes.Split(bytes.TrimSuffix(stream, []byte("\n\n")), []byte("\n\n")) {
		if len(block) == 0 {
			continue
		}
		lines := bytes.Split(block, []byte("\n"))
		if len(lines) != 2 || !bytes.HasPrefix(lines[0], []byte("event: ")) || !bytes.HasPrefix(lines[1], []byte("data: ")) {
			t.Fatalf("malformed event:\n%s", block)
		}
		events = append(events, sseEvent{
			name: string(bytes.TrimPrefix(lines[0], []byte("event: "))),
			data: bytes.TrimPrefix(lines[1], []byte("data: ")),
		})
	}
	return events
}

// checkEvents decodes every event with openai-go's stream event union
// and checks what every Responses stream must satisfy: the event: line
// names the type; sequence numbers count from 0; it starts with
// response.created and response.in_progress and ends with exactly one
// terminal event; every item added is done (but after a failure) with the
// same id at the same index, and the terminal response's output holds
// every item exactly as output_item.done sent it. It returns the terminal
// response.
func checkEvents(t testing.TB, stream []byte) (events []sseEvent, final responses.Response) {
	t.Helper()
	events = splitEvents(t, stream)
	if len(events) < 3 {
		t.Fatalf("only %d events", len(events))
	}
	added := map[int64]string{}
	done := map[int64][]byte{}
	terminals := 0
	for i, ev := range events {
		var u responses.ResponseStreamEventUnion
		if err := json.Unmarshal(ev.data, &u); err != nil {
			t.Fatalf("event %d: openai-go cannot decode it: %v\n%s", i, err, ev.data)
		}
		if u.Type != ev.name {
			t.Fatalf("event %d: event: line %q, type %q", i, ev.name, u.Type)
		}
		if gjson.GetBytes(ev.data, "error").Exists() {
			t.Fatalf("event %d has a top-level error key, which the SDKs raise as an exception:\n%s", i, ev.data)
		}
		if p := requiredProblems(u); len(p) > 0 {
			t.Fatalf("event %d (%s) does not satisfy openai-go's type:\n  %s\n%s", i, u.Type, strings.Join(p, "\n  "), ev.data)
		}
		if u.SequenceNumber != int64(i) || !gjson.GetBytes(ev.data, "sequence_number").Exists() {
			t.Fatalf("event %d has sequence_number %d", i, u.SequenceNumber)
		}
		switch {
		case i == 0 && u.Type != "response.created", i == 1 && u.Type != "response.in_progress":
			t.Fatalf("event %d is %s", i, u.Type)
		}
		switch u.Type {
		case "response.output_item.added":
			if _, ok := added[u.OutputIndex]; ok {
				t.Fatalf("event %d: a second item added at output_index %d", i, u.OutputIndex)
			}
			if u.OutputIndex != int64(len(added)) {
				t.Fatalf("event %d: item added at output_index %d after %d items", i, u.OutputIndex, len(added))
			}
			added[u.OutputIndex] = u.Item.ID
		case "response.output_item.done":
			if added[u.OutputIndex] != u.Item.ID {
				t.Fatalf("event %d: item %q done at output_index %d, where %q was added", i, u.Item.ID, u.OutputIndex, added[u.OutputIndex])
			}
			if done[u.OutputIndex] != nil {
				t.Fatalf("event %d: item %d done twice", i, u.OutputIndex)
			}
			done[u.OutputIndex] = []byte(gjson.GetBytes(ev.data, "item").Raw)
		case "response.completed", "response.incomplete", "response.failed":
			terminals++
			if i != len(events)-1 {
				t.Fatalf("event %d: %s is not the last event", i, u.Type)
			}
			final = decodeResponse(t, []byte(gjson.GetBytes(ev.data, "response").Raw))
			if want := strings.TrimPrefix(u.Type, "response."); string(final.Status) != want {
				t.Fatalf("%s carries status %q", u.Type, final.Status)
			}
			out := gjson.GetBytes(ev.data, "response.output").Array()
			if len(out) != len(added) {
				t.Fatalf("the final output has %d items, %d were added", len(out), len(added))
			}
			for k, item := range out {
				d, ok := done[int64(k)]
				if !ok {
					if u.Type != "response.failed" {
						t.Fatalf("item %d was never done", k)
					}
					continue
				}
				if !bytes.Equal(d, []byte(item.Raw)) {
					t.Fatalf("item %d differs between output_item.done and %s:\n%s\n%s", k, u.Type, d, item.Raw)
				}
			}
		default:
			if id := gjson.GetBytes(ev.data, "item_id"); id.Exists() {
				k := gjson.GetBytes(ev.data, "output_index").Int()
				if added[k] != id.Str || done[k] != nil {
					t.Fatalf("event %d (%s) refers to item %q at %d, which is not open", i, u.Type, id.Str, k)
				}
			}
		}
	}
	if terminals != 1 {
		t.Fatalf("%d terminal events", terminals)
	}
	return events, final
}
