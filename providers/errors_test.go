package providers

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestErrorJSON(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want map[string]any
	}{
		{Error{Type: "invalid_request_error", Message: "bad \"x\""},
			map[string]any{"message": `bad "x"`, "type": "invalid_request_error", "param": nil, "code": nil}},
		{Error{Type: "invalid_request_error", Code: "invalid_value", Param: "messages[0].role", Message: "m"},
			map[string]any{"message": "m", "type": "invalid_request_error", "param": "messages[0].role", "code": "invalid_value"}},
	} {
		var got map[string]map[string]any
		if err := json.Unmarshal(tc.e.JSON(), &got); err != nil {
			t.Fatalf("%s: %v", tc.e.JSON(), err)
		}
		if len(got) != 1 || !reflect.DeepEqual(got["error"], tc.want) {
			t.Errorf("%s, want error %v", tc.e.JSON(), tc.want)
		}
	}
}

func TestTypeForStatus(t *testing.T) {
	for status, want := range map[int]string{
		400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
		404: "not_found_error", 409: "invalid_request_error", 413: "invalid_request_error",
		429: "rate_limit_error", 500: "server_error", 503: "server_error",
	} {
		if got := TypeForStatus(status); got != want {
			t.Errorf("TypeForStatus(%d) = %q, want %q", status, got, want)
		}
	}
}
