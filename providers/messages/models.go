package messages

import (
	"net/url"
	"strconv"

	"github.com/modelgate/modelgate/providers/jsonw"
)

// ModelPage is one page of GET /v1/models in Anthropic's convention:
// after_id, before_id and limit (1 to 1000, default 20).
type ModelPage struct {
	AfterID, BeforeID string
	Limit             int
}

// DefaultModelLimit is the page size when the request gives none.
const DefaultModelLimit = 20

// ParseModelPage reads the page parameters of GET /v1/models. A limit
// outside 1…1000, or both after_id and before_id, is a 400.
func ParseModelPage(q url.Values) (ModelPage, error) {
	p := ModelPage{AfterID: q.Get("after_id"), BeforeID: q.Get("before_id"), Limit: DefaultModelLimit}
	if p.AfterID != "" && p.BeforeID != "" {
		return p, invalid("before_id", "give after_id or before_id, not both")
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return p, invalid("limit", "limit must be an integer from 1 to 1000")
		}
		p.Limit = n
	}
	return p, nil
}

// unknownTime is created_at for models whose release the gateway does not
// know: Anthropic's API "may set it to an epoch value if unknown".
const unknownTime = "1970-01-01T00:00:00Z"

// ModelList writes the model list of GET /v1/models in Anthropic's shape
// for the given model ids, in their order, one page of it:
//
//	{"data":[{"type":"model","id":"…","display_name":"…","created_at":"…"}],
//	 "has_more":false,"first_id":"…","last_id":"…"}
//
// display_name is the id (the gateway knows no other name) and created_at
// the epoch. An after_id or before_id that is not in ids gives an empty
// page.
func ModelList(ids []string, page ModelPage) []byte {
	limit := page.Limit
	if limit < 1 {
		limit = DefaultModelLimit
	}
	var from, to int
	switch {
	case page.AfterID != "":
		from = indexOf(ids, page.AfterID) + 1
		if from == 0 {
			from = len(ids)
		}
		to = min(from+limit, len(ids))
	case page.BeforeID != "":
		to = indexOf(ids, page.BeforeID)
		if to < 0 {
			to = 0
		}
		from = max(to-limit, 0)
	default:
		to = min(limit, len(ids))
	}
	hasMore := to < len(ids)
	if page.BeforeID != "" {
		hasMore = from > 0
	}

	w := jsonw.New(make([]byte, 0, 64+(to-from)*96))
	o := w.Object()
	data := o.Array("data")
	for _, id := range ids[from:to] {
		writeModel(data.Value(), id)
	}
	data.End()
	o.Bool("has_more", hasMore)
	if from < to {
		o.Str("first_id", ids[from])
		o.Str("last_id", ids[to-1])
	} else {
		o.Null("first_id")
		o.Null("last_id")
	}
	o.End()
	b, _ := w.Finish() // straight-line writing: no misuse
	return b
}

// ModelInfo writes one model as GET /v1/models/{id} answers it.
func ModelInfo(id string) []byte {
	w := jsonw.New(nil)
	writeModel(w.Value(), id)
	b, _ := w.Finish() // straight-line writing: no misuse
	return b
}

func writeModel(v jsonw.Value, id string) {
	o := v.Object()
	o.Str("type", "model")
	o.Str("id", id)
	o.Str("display_name", id)
	o.Str("created_at", unknownTime)
	o.End()
}

func indexOf(ids []string, id string) int {
	for i, s := range ids {
		if s == id {
			return i
		}
	}
	return -1
}
