package providertest

import (
	"testing"

	"github.com/tidwall/gjson"
)

// TestModeration: the fake's moderations answer in OpenAI's shape, one
// result per input, flagged by the trigger words; bad inputs are 400s.
func TestModeration(t *testing.T) {
	s := Start(t, Options{})
	resp, body := Send(t, "POST", s.URL+"/v1/moderations", `{"input":["a calm text",{"type":"text","text":"I will attack"}]}`, "Authorization", "Bearer k")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	res := gjson.Get(body, "results")
	if len(res.Array()) != 2 || res.Get("0.flagged").Bool() || !res.Get("1.flagged").Bool() ||
		!res.Get("1.categories.violence").Bool() || res.Get("1.categories.hate").Bool() ||
		gjson.Get(body, "model").Str != "omni-moderation-latest" || res.Get("0.category_scores.violence").Float() >= 0.5 {
		t.Errorf("answer %s", body)
	}
	if n := len(res.Get("0.categories").Map()); n != 13 {
		t.Errorf("%d categories", n)
	}
	for _, bad := range []string{`{}`, `{"input":5}`, `{"input":[]}`, `{"input":"x","extra":1}`, `{"input":[{"type":"audio"}]}`, `[`} {
		if resp, body := Send(t, "POST", s.URL+"/v1/moderations", bad, "Authorization", "Bearer k"); resp.StatusCode != 400 || !isOpenAIError(body) {
			t.Errorf("%s: %d %s", bad, resp.StatusCode, body)
		}
	}
}
