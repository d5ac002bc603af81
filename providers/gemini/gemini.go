// Package gemini translates modelgate's unified (OpenAI-shaped) chat
// completions to and from Google's Gemini API (generateContent and
// streamGenerateContent), on the Gemini Developer API and on Vertex AI:
// request bodies, answers, server-sent event streams and errors.
//
// Both services take the same GenerateContentRequest body and give the same
// answers; they differ in the URL path (and in authentication, which is the
// host's business). Chat.Vertex selects the Vertex AI path.
//
// Embeddings translates embeddings requests: batchEmbedContents on the
// Developer API, predict or embedContent on Vertex AI (see Embeddings).
//
// Like every translator it works on bytes: it reads JSON with gjson and
// writes it by appending, copying raw JSON values through where it can.
//
// Thought signatures (the opaque thoughtSignature Gemini 2.5 and 3 put on
// parts, which Gemini 3 requires back on function calls) travel through the
// OpenAI shape in two carriers that a client echoing the assistant message
// back returns unchanged: a function call's signature is appended to the tool
// call id ("<id>__thought__<signature>", LiteLLM's convention, with the
// signature in URL-safe base64), and a signature on a thought or text part
// becomes a thinking_blocks entry. See ChatRequest and ChatResponse.
package gemini

import (
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"github.com/modelgate/modelgate/providers"
)

const (
	// DefaultBaseURL is the Gemini Developer API's base URL; request paths
	// ("/models/{model}:generateContent") are appended to it.
	DefaultBaseURL = "https://generativelanguage.googleapis.com/v1beta"

	// VertexScope is the OAuth scope Vertex AI access tokens need.
	VertexScope = "https://www.googleapis.com/auth/cloud-platform"
)

// VertexBaseURL is Vertex AI's base URL (API version v1) for a location:
// the global endpoint for "global" (and ""), the multi-region endpoints
// for "us" and "eu", and the regional endpoint otherwise. Request paths
// ("/projects/{project}/locations/{location}/publishers/google/models/
// {model}:generateContent") are appended to it.
func VertexBaseURL(location string) string {
	switch location {
	case "", "global":
		return "https://aiplatform.googleapis.com/v1"
	case "us", "eu":
		return "https://aiplatform." + location + ".rep.googleapis.com/v1"
	default:
		return "https://" + location + "-aiplatform.googleapis.com/v1"
	}
}

// Chat is the translator for the Gemini API. The zero value speaks the
// Gemini Developer API; a Chat is safe for concurrent use.
type Chat struct {
	// Vertex selects Gemini on Vertex AI: request paths start with
	// /projects/{Project}/locations/{Location} (or, when Project is empty,
	// Vertex's express mode, /publishers/google/models/…).
	Vertex bool

	// Project is the Google Cloud project for Vertex AI.
	Project string

	// Location is the Vertex AI location (a region such as us-central1,
	// or "global"). Default: global.
	Location string

	// Now returns the time for "created"; nil means time.Now.
	Now func() time.Time

	// newID makes the random part of generated ids (tests set it);
	// nil means randomID.
	newID func() string
}

var _ providers.Chat = Chat{}

func (c Chat) now() time.Time { return providers.Now(c.Now) }

func (c Chat) id() string {
	if c.newID != nil {
		return c.newID()
	}
	return randomID()
}

// name is the provider type named in unsupported-parameter errors.
func (c Chat) name() string {
	if c.Vertex {
		return "vertex"
	}
	return "gemini"
}

// unsupported is providers.Unsupported with a more specific message.
func (c Chat) unsupported(param, msg string) *providers.Error {
	e := providers.Unsupported(param, c.name())
	if msg != "" {
		e.Message = msg + " (provider type " + c.name() + ")"
	}
	return e
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randomID returns 24 random base62 characters. Ids need to be unique,
// not secret, so math/rand's per-goroutine ChaCha8 source is enough.
func randomID() string {
	var b [24]byte
	for i := 0; i < len(b); i += 8 {
		r := rand.Uint64()
		for j := i; j < i+8; j++ {
			b[j] = base62[r%62]
			r /= 62
		}
	}
	return string(b[:])
}

// path returns the request path for model: the model's resource (see
// resource) followed by :generateContent or :streamGenerateContent.
func (c Chat) path(model string, stream bool) (string, error) {
	res, err := c.resource(model)
	if err != nil {
		return "", err
	}
	if stream {
		return res + ":streamGenerateContent", nil
	}
	return res + ":generateContent", nil
}

// resource returns the path of model's resource, to which a method
// (":generateContent", ":predict", …) is appended.
//
// The model comes from the client (through routing), so it is checked
// segment by segment rather than trusted: each segment may hold only
// letters, digits and "-", "_", ".", "@", and may not be "." or "..", so no
// model name can climb out of its resource or add a query. The accepted
// forms are a bare name ("gemini-2.5-flash"), "models/{name}" and
// "tunedModels/{name}" on the Developer API, and "publishers/{p}/models/
// {name}" and "endpoints/{id}" on Vertex AI.
func (c Chat) resource(model string) (string, error) {
	segs := strings.Split(model, "/")
	for _, s := range segs {
		if !validSegment(s) {
			return "", providers.InvalidParam("model",
				"the model name %q cannot be sent to provider type %s: use letters, digits, '-', '_', '.' and '@'", model, c.name())
		}
	}
	var b strings.Builder
	b.Grow(len(model) + 96)
	if c.Vertex {
		if c.Project != "" {
			loc := c.Location
			if loc == "" {
				loc = "global"
			}
			b.WriteString("/projects/")
			b.WriteString(url.PathEscape(c.Project))
			b.WriteString("/locations/")
			b.WriteString(url.PathEscape(loc))
		}
		switch {
		case len(segs) == 1:
			b.WriteString("/publishers/google/models/")
		case len(segs) == 2 && segs[0] == "models":
			b.WriteString("/publishers/google/models/")
			model = segs[1]
		case len(segs) == 2 && segs[0] == "endpoints",
			len(segs) == 4 && segs[0] == "publishers" && segs[2] == "models":
			b.WriteByte('/')
		default:
			return "", providers.InvalidParam("model",
				"the model name %q is not a Vertex AI model: give its name, publishers/{publisher}/models/{name} or endpoints/{id}", model)
		}
	} else {
		switch {
		case len(segs) == 1:
			b.WriteString("/models/")
		case len(segs) == 2 && (segs[0] == "models" || segs[0] == "tunedModels"):
			b.WriteByte('/')
		default:
			return "", providers.InvalidParam("model",
				"the model name %q is not a Gemini model: give its name, models/{name} or tunedModels/{name}", model)
		}
	}
	b.WriteString(model)
	return b.String(), nil
}

func validSegment(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == '@':
		default:
			return false
		}
	}
	return true
}

// family is what the translation needs to know about a model's generation.
type family struct {
	// levels: the model takes thinkingConfig.thinkingLevel (Gemini 3 and
	// later); otherwise thinkingBudget (Gemini 2.5 and earlier).
	levels bool
	// pro: a Pro model, which cannot turn thinking off and (Gemini 3 Pro)
	// takes only the LOW and HIGH levels.
	pro bool
}

// familyOf tells model generations apart by name: "gemini-1.x" and
// "gemini-2.x" (after any "models/" or "publishers/…/models/" prefix) are
// budget-based, every other name level-based, since new models (and the
// "-latest" aliases) take levels.
func familyOf(model string) family {
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	model = strings.ToLower(model)
	f := family{levels: true, pro: strings.Contains(model, "-pro")}
	if v, ok := strings.CutPrefix(model, "gemini-"); ok && len(v) > 1 && (v[0] == '1' || v[0] == '2') &&
		(v[1] == '.' || v[1] == '-') {
		f.levels = false
	}
	return f
}

// finishReason maps a Gemini finishReason to OpenAI's finish_reason, given
// whether the candidate called functions.
func finishReason(reason string, calls bool) string {
	switch reason {
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE", "OTHER",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "IMAGE_OTHER", "NO_IMAGE", "MODEL_ARMOR":
		return "content_filter"
	case "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS", "MISSING_THOUGHT_SIGNATURE":
		// The model tried to call a function and failed: no usable call.
		return "stop"
	default: // STOP, FINISH_REASON_UNSPECIFIED, absent, new reasons
		if calls {
			return "tool_calls"
		}
		return "stop"
	}
}
