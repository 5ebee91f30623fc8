package transformtest

import (
	"reflect"
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
