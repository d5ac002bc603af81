package anthropic

import (
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// writeOutputSchema writes a response_format schema as
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
func writeOutputSchema(v jsonw.Value, s gjson.Result) {
	if !s.IsObject() {
		// Boolean schemas and the like pass as they are.
		v.Raw(s.Raw)
		return
	}
	if ref := s.Get(`\$ref`); ref.Exists() {
		o := v.Object()
		o.Raw("$ref", ref.Raw)
		o.End()
		return
	}

	var typ, description, properties, additional, anyOf, oneOf, format, minItems gjson.Result
	var extras []extra
	o := v.Object()
	s.ForEach(func(k, v gjson.Result) bool {
		switch key := k.Str; key {
		case "type":
			typ = v
			o.Raw(key, v.Raw)
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
			writeSchemaMap(o.Key(key), v)
		case "allOf":
			writeSchemaList(o.Key(key), v)
		case "items":
			if v.IsArray() {
				writeSchemaList(o.Key(key), v)
			} else {
				writeOutputSchema(o.Key(key), v)
			}
		case "title", "enum", "const", "required", "pattern":
			o.Raw(key, v.Raw)
		default:
			extras = append(extras, extra{key, v})
		}
		return true
	})

	switch {
	case anyOf.IsArray():
		writeSchemaList(o.Key("anyOf"), anyOf)
		if oneOf.Exists() {
			extras = append(extras, extra{"oneOf", oneOf})
		}
	case oneOf.IsArray():
		writeSchemaList(o.Key("anyOf"), oneOf)
	}

	switch typ.Str {
	case "object":
		switch {
		case properties.IsObject():
			writeSchemaMap(o.Key("properties"), properties)
			o.Bool("additionalProperties", false)
		case additional.IsObject():
			writeOutputSchema(o.Key("additionalProperties"), additional)
		default:
			o.Object("properties").End()
			o.Bool("additionalProperties", false)
		}
		properties, additional = gjson.Result{}, gjson.Result{}
	case "string":
		if format.Exists() {
			if format.Type == gjson.String && slices.Contains(supportedFormats, format.Str) {
				o.Raw("format", format.Raw)
			} else {
				extras = append(extras, extra{"format", format})
			}
			format = gjson.Result{}
		}
	case "array":
		if minItems.Exists() {
			if minItems.Raw == "0" || minItems.Raw == "1" {
				o.Raw("minItems", minItems.Raw)
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
			o.Raw(kv.key, kv.v.Raw)
		}
	}

	if len(extras) > 0 || description.Exists() {
		writeDescription(o.Key("description"), description, extras)
	}
	o.End()
}

// supportedFormats are the string formats Anthropic's JSON outputs take.
var supportedFormats = []string{"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}

// extra is a keyword moved into the description.
type extra struct {
	key string
	v   gjson.Result
}

// writeDescription writes the description with the extras, sorted by
// keyword, appended as "{keyword: value, …}" after a blank line.
func writeDescription(v jsonw.Value, description gjson.Result, extras []extra) {
	if len(extras) == 0 {
		v.Raw(description.Raw)
		return
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
	v.Str(sb.String())
}

// writeSchemaMap writes an object of schemas (properties, $defs), each
// rewritten.
func writeSchemaMap(v jsonw.Value, m gjson.Result) {
	if !m.IsObject() {
		v.Raw(m.Raw)
		return
	}
	o := v.Object()
	m.ForEach(func(k, v gjson.Result) bool {
		writeOutputSchema(o.KeyText(jsonw.Lit(k.Raw)), v)
		return true
	})
	o.End()
}

// writeSchemaList writes an array of schemas (anyOf, allOf), each
// rewritten.
func writeSchemaList(v jsonw.Value, l gjson.Result) {
	if !l.IsArray() {
		v.Raw(l.Raw)
		return
	}
	a := v.Array()
	l.ForEach(func(_, v gjson.Result) bool {
		writeOutputSchema(a.Value(), v)
		return true
	})
	a.End()
}
