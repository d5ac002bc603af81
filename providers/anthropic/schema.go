package anthropic

import (
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// appendOutputSchema appends a response_format schema as
// output_config.format takes it. Anthropic's JSON outputs take a subset of
// JSON Schema; this applies the rewrite Anthropic's own SDKs apply to a
// schema before sending it (anthropic-sdk-go schemautil.go,
// transformSchema, used by BetaJSONSchemaOutputFormat):
//
//   - a $ref stands alone;
//   - oneOf becomes anyOf;
//   - an object with properties gets "additionalProperties": false; one
//     with neither properties nor an additionalProperties schema becomes
//     the empty object;
//   - string formats other than date-time, time, date, duration, email,
//     hostname, uri, ipv4, ipv6 and uuid, minItems other than 0 and 1, and
//     every keyword outside the supported set are taken out and written
//     into the description as "{keyword: value, …}", so the model still
//     reads them.
//
// One difference: "definitions" (draft-07's $defs) is kept and rewritten
// like $defs, since moving it into a description would break every $ref
// that points into it.
func appendOutputSchema(b []byte, s gjson.Result) []byte {
	if !s.IsObject() {
		// Boolean schemas and the like pass as they are.
		return append(b, s.Raw...)
	}
	if ref := s.Get(`\$ref`); ref.Exists() {
		b = append(b, `{"$ref":`...)
		b = append(b, ref.Raw...)
		return append(b, '}')
	}

	var typ, description, properties, additional, anyOf, oneOf, format, minItems gjson.Result
	var extras []extra
	n := 0
	field := func(key string) {
		b = sep(b, &n)
		b = providers.AppendString(b, key)
		b = append(b, ':')
	}
	b = append(b, '{')
	s.ForEach(func(k, v gjson.Result) bool {
		switch key := k.Str; key {
		case "type":
			typ = v
			field(key)
			b = append(b, v.Raw...)
		case "description":
			description = v
		case "properties":
			properties = v
		case "additionalProperties":
			additional = v
		case "anyOf":
			anyOf = v
		case "oneOf":
			oneOf = v
		case "format":
			format = v
		case "minItems":
			minItems = v
		case "$defs", "definitions":
			field(key)
			b = appendSchemaMap(b, v)
		case "allOf":
			field(key)
			b = appendSchemaList(b, v)
		case "items":
			field(key)
			if v.IsArray() {
				b = appendSchemaList(b, v)
			} else {
				b = appendOutputSchema(b, v)
			}
		case "title", "enum", "const", "required", "pattern":
			field(key)
			b = append(b, v.Raw...)
		default:
			extras = append(extras, extra{key, v})
		}
		return true
	})

	switch {
	case anyOf.IsArray():
		field("anyOf")
		b = appendSchemaList(b, anyOf)
		if oneOf.Exists() {
			extras = append(extras, extra{"oneOf", oneOf})
		}
	case oneOf.IsArray():
		field("anyOf")
		b = appendSchemaList(b, oneOf)
	}

	switch typ.Str {
	case "object":
		switch {
		case properties.IsObject():
			field("properties")
			b = appendSchemaMap(b, properties)
			field("additionalProperties")
			b = append(b, "false"...)
		case additional.IsObject():
			field("additionalProperties")
			b = appendOutputSchema(b, additional)
		default:
			field("properties")
			b = append(b, "{}"...)
			field("additionalProperties")
			b = append(b, "false"...)
		}
		properties, additional = gjson.Result{}, gjson.Result{}
	case "string":
		if format.Exists() {
			if format.Type == gjson.String && slices.Contains(supportedFormats, format.Str) {
				field("format")
				b = append(b, format.Raw...)
			} else {
				extras = append(extras, extra{"format", format})
			}
			format = gjson.Result{}
		}
	case "array":
		if minItems.Exists() {
			if minItems.Raw == "0" || minItems.Raw == "1" {
				field("minItems")
				b = append(b, minItems.Raw...)
			} else {
				extras = append(extras, extra{"minItems", minItems})
			}
			minItems = gjson.Result{}
		}
	}
	// Keywords of the supported set that do not fit the schema's type
	// pass as they are.
	for _, kv := range []extra{{"properties", properties}, {"additionalProperties", additional},
		{"format", format}, {"minItems", minItems}} {
		if kv.v.Exists() {
			field(kv.key)
			b = append(b, kv.v.Raw...)
		}
	}

	if len(extras) > 0 || description.Exists() {
		field("description")
		b = appendDescription(b, description, extras)
	}
	return append(b, '}')
}

// supportedFormats are the string formats Anthropic's JSON outputs take.
var supportedFormats = []string{"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}

// extra is a keyword moved into the description.
type extra struct {
	key string
	v   gjson.Result
}

// appendDescription appends the description with the extras, sorted by
// keyword, appended as "{keyword: value, …}" after a blank line.
func appendDescription(b []byte, description gjson.Result, extras []extra) []byte {
	if len(extras) == 0 {
		return append(b, description.Raw...)
	}
	slices.SortFunc(extras, func(a, b extra) int { return strings.Compare(a.key, b.key) })
	var sb strings.Builder
	if description.Type == gjson.String && description.Str != "" {
		sb.WriteString(description.Str)
		sb.WriteString("\n\n")
	}
	sb.WriteByte('{')
	for i, e := range extras {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(e.key)
		sb.WriteString(": ")
		switch e.v.Type {
		case gjson.String:
			sb.WriteString(e.v.Str)
		case gjson.JSON:
			sb.WriteString(providers.CompactJSON(e.v.Raw))
		default:
			sb.WriteString(e.v.Raw)
		}
	}
	sb.WriteByte('}')
	return providers.AppendString(b, sb.String())
}

// appendSchemaMap appends an object of schemas (properties, $defs), each
// rewritten.
func appendSchemaMap(b []byte, m gjson.Result) []byte {
	if !m.IsObject() {
		return append(b, m.Raw...)
	}
	b = append(b, '{')
	n := 0
	m.ForEach(func(k, v gjson.Result) bool {
		b = sep(b, &n)
		b = append(b, k.Raw...)
		b = append(b, ':')
		b = appendOutputSchema(b, v)
		return true
	})
	return append(b, '}')
}

// appendSchemaList appends an array of schemas (anyOf, allOf), each
// rewritten.
func appendSchemaList(b []byte, l gjson.Result) []byte {
	if !l.IsArray() {
		return append(b, l.Raw...)
	}
	b = append(b, '[')
	n := 0
	l.ForEach(func(_, v gjson.Result) bool {
		b = sep(b, &n)
		b = appendOutputSchema(b, v)
		return true
	})
	return append(b, ']')
}
