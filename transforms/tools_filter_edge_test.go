package transforms

import (
	"errors"
	"testing"
)

// TestToolsFilterRefusesRepeatedIdentityKeys: a definition that names
// itself twice would be judged by its first name and served by its last,
// which upstream JSON parsers keep, so a denied tool could pass as an
// allowed one. Such a request is refused before anything is filtered.
func TestToolsFilterRefusesRepeatedIdentityKeys(t *testing.T) {
	c := chainOf(t, `[{"transform":"tools_filter","config":{"deny":["delete_*"]}}]`)
	for _, tc := range []struct {
		proto      Protocol
		body, want string
	}{
		{ProtocolResponses, `{"model":"m","input":"hi","tools":[{"type":"function","name":"read"},{"type":"function","name":"read","name":"delete_repo"}]}`, "tools[1]"},
		{ProtocolResponses, `{"model":"m","input":"hi","tools":[{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"ok","type":"function"}]}]}`, "tools[0].tools[0]"},
		{ProtocolChat, `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"read","parameters":{},"name":"delete_repo"}}]}`, "tools[0]"},
	} {
		x := begin(t, c, tc.proto, []byte(tc.body))
		_, err := x.RewriteRequest([]byte(tc.body))
		var te *Error
		if !errors.As(err, &te) || te.Status != 400 || te.Code != "ambiguous_tool" || te.Param != tc.want {
			t.Errorf("%s: got %v, want a 400 ambiguous_tool at %s", tc.body, err, tc.want)
		}
	}
	// A rule that filters nothing by name has nothing to be fooled about.
	off := chainOf(t, `[{"transform":"tools_filter","config":{"defaults":[{"type":"function","name":"x"}]}}]`)
	body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"a","name":"b"}]}`)
	x := begin(t, off, ProtocolResponses, body)
	if _, err := x.RewriteRequest(body); err != nil {
		t.Fatalf("defaults only: %v", err)
	}
}

// TestNormalizeSchemaEnumNullAndUntypedFormat: an enum that loses its null
// to enum_to_string says nullable instead, and a format without a type is
// judged as on a string.
func TestNormalizeSchemaEnumNullAndUntypedFormat(t *testing.T) {
	gemini := chainOf(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"gemini"}}]`)
	body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"n":{"type":"integer","enum":[1,null]},"u":{"format":"uri"}}}}]}`)
	x := begin(t, gemini, ProtocolResponses, body)
	out, err := x.RewriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"n":{"type":"string","enum":["1"],"nullable":true},"u":{"description":"(format: \"uri\")"}}}}]}`)
	anthropic := chainOf(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"anthropic"}}]`)
	body = []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object","properties":{"h":{"format":"hostname"}},"required":["h"],"additionalProperties":false}}]}`)
	x = begin(t, anthropic, ProtocolResponses, body)
	if out, err = x.RewriteRequest(body); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object","properties":{"h":{"description":"(format: \"hostname\")"}},"required":["h"],"additionalProperties":false}}]}`)
}
