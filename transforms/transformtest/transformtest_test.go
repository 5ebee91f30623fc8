package transformtest

import (
	"reflect"
	"strings"
	"testing"
)

// An event whose data spans several data lines is one payload, its lines
// joined by newlines, as SSE clients read it.
func TestEventsJoinsDataLines(t *testing.T) {
	stream := "event: response.created\ndata: {\"type\":\"response.created\",\ndata: \"sequence_number\":0}\n\n" +
		"data: {\"type\":\"response.completed\",\"sequence_number\":1}\n\n"
	got := Events(t, stream)
	want := []map[string]any{
		{"type": "response.created", "sequence_number": float64(0)},
		{"type": "response.completed", "sequence_number": float64(1)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	chunks, done := ChatChunks(t, "data: {\"id\":\ndata: \"c\"}\n\ndata: [DONE]\n\n")
	if !done || len(chunks) != 1 || chunks[0]["id"] != "c" {
		t.Fatalf("got %v, done %v", chunks, done)
	}
}

// MissingRequired names every member openai-go requires that an object
// lacks, its usage's included, and nothing for a complete one.
func TestMissingRequiredNamesWhatIsMissing(t *testing.T) {
	got := strings.Join(MissingRequired([]byte(`{"id":"r","object":"response","created_at":1,"error":null,"output":[],"usage":{"input_tokens":1,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"total_tokens":2}}`)), ",")
	want := "access_programs,incomplete_details,instructions,metadata,model,parallel_tool_calls,temperature,tool_choice,tools,top_p,usage.input_tokens_details.cache_write_tokens,usage.output_tokens_details"
	if got != want {
		t.Fatalf("missing %s\nwant    %s", got, want)
	}
	full := `{"id":"r","object":"response","created_at":1,"status":"completed","model":"m","output":[],"error":null,"incomplete_details":null,"instructions":null,"metadata":{},"parallel_tool_calls":true,"temperature":1,"tool_choice":"auto","tools":[],"top_p":1,"access_programs":{"cyber":"standard"},"usage":null}`
	if m := MissingRequired([]byte(full)); len(m) != 0 {
		t.Fatalf("missing %v", m)
	}
}
