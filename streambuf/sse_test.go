package streambuf

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// chunkSizes are the replay sizes every chunking test must agree on.
var chunkSizes = []int{1, 7, 4096}

// rec is a copy of an event, with nil kept distinct from empty.
type rec struct {
	raw, name, data          string
	rawNil, nameNil, dataNil bool
}

func (r rec) String() string {
	f := func(s string, isNil bool) string {
		if isNil {
			return "nil"
		}
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("{raw:%s name:%s data:%s}", f(r.raw, r.rawNil), f(r.name, r.nameNil), f(r.data, r.dataNil))
}

func toRec(e *Event) rec {
	return rec{
		raw: string(e.Raw), rawNil: e.Raw == nil,
		name: string(e.Name), nameNil: e.Name == nil,
		data: string(e.Data), dataNil: e.Data == nil,
	}
}

// ev builds the expected record of an unmodified event; name and data use
// "<nil>" for absent.
func ev(raw, name, data string) rec {
	return rec{raw: raw, name: name, data: data, nameNil: name == "<nil>", dataNil: data == "<nil>"}.norm()
}

func (r rec) norm() rec {
	if r.nameNil {
		r.name = ""
	}
	if r.dataNil {
		r.data = ""
	}
	return r
}

// feedChunks feeds in in chunks of size n and returns the events, the
// wire output re-serialised with AppendTo, Rest and the first error.
func feedChunks(p *Parser, in []byte, n int) (evs []rec, out []byte, rest string, err error) {
	_, err = feedUntil(p, in, n, func(e *Event) error {
		evs = append(evs, toRec(e))
		out = e.AppendTo(out)
		return nil
	})
	return evs, out, string(p.Rest()), err
}

func TestParser(t *testing.T) {
	const nilS = "<nil>"
	tests := []struct {
		name string
		in   string
		want []rec
		rest string
	}{
		{"responses event", "event: response.created\ndata: {\"type\":\"response.created\"}\n\n",
			[]rec{ev("event: response.created\ndata: {\"type\":\"response.created\"}\n\n", "response.created", `{"type":"response.created"}`)}, ""},
		{"crlf", "event: a\r\ndata: x\r\n\r\n",
			[]rec{ev("event: a\r\ndata: x\r\n\r\n", "a", "x")}, ""},
		{"cr only, last cr waits", "data: x\r\rdata: y\r\r",
			[]rec{ev("data: x\r\r", nilS, "x")}, "data: y\r\r"},
		{"cr then crlf blank", "data: x\r\r\ndata: y\n\n",
			[]rec{ev("data: x\r\r\n", nilS, "x"), ev("data: y\n\n", nilS, "y")}, ""},
		{"mixed terminators", "data: a\r\ndata: b\rdata: c\n\r\n",
			[]rec{ev("data: a\r\ndata: b\rdata: c\n\r\n", nilS, "a\nb\nc")}, ""},
		{"multi-line data", "data: a\ndata: b\ndata:\ndata:c\n\n",
			[]rec{ev("data: a\ndata: b\ndata:\ndata:c\n\n", nilS, "a\nb\n\nc")}, ""},
		{"keep-alive comment", ": keep-alive\n\n",
			[]rec{ev(": keep-alive\n\n", nilS, nilS)}, ""},
		{"blank lines", "\n\r\n\r\n",
			[]rec{ev("\n", nilS, nilS), ev("\r\n", nilS, nilS), ev("\r\n", nilS, nilS)}, ""},
		{"field without colon", "data\n\n",
			[]rec{ev("data\n\n", nilS, "")}, ""},
		{"one space stripped", "data:  two\n\n",
			[]rec{ev("data:  two\n\n", nilS, " two")}, ""},
		{"no space", "event:x\ndata:{}\n\n",
			[]rec{ev("event:x\ndata:{}\n\n", "x", "{}")}, ""},
		{"empty event name", "event:\ndata: x\n\n",
			[]rec{ev("event:\ndata: x\n\n", "", "x")}, ""},
		{"last event name wins", "event: a\nevent: b\ndata: x\n\n",
			[]rec{ev("event: a\nevent: b\ndata: x\n\n", "b", "x")}, ""},
		{"retry and id only", "retry: 100\nid: 5\n\n",
			[]rec{ev("retry: 100\nid: 5\n\n", nilS, nilS)}, ""},
		{"unknown field and comment between data", "data: a\nfoo: bar\n: c\ndata: b\n\n",
			[]rec{ev("data: a\nfoo: bar\n: c\ndata: b\n\n", nilS, "a\nb")}, ""},
		{"colons in value", "data: {\"a\":\"b: c\"}\n\n",
			[]rec{ev("data: {\"a\":\"b: c\"}\n\n", nilS, `{"a":"b: c"}`)}, ""},
		{"field name is exact", "Data: x\ndata : y\n\n",
			[]rec{ev("Data: x\ndata : y\n\n", nilS, nilS)}, ""},
		{"chat stream with done", "data: {\"choices\":[]}\n\ndata: [DONE]\n\n",
			[]rec{ev("data: {\"choices\":[]}\n\n", nilS, `{"choices":[]}`), ev("data: [DONE]\n\n", nilS, "[DONE]")}, ""},
		{"incomplete trailing event", "data: a\n\ndata: b\n",
			[]rec{ev("data: a\n\n", nilS, "a")}, "data: b\n"},
		{"incomplete trailing line", "data: a\n\nevent: x\ndata: {\"par",
			[]rec{ev("data: a\n\n", nilS, "a")}, "event: x\ndata: {\"par"},
		{"empty", "", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range chunkSizes {
				var p Parser
				evs, out, rest, err := feedChunks(&p, []byte(tt.in), n)
				if err != nil {
					t.Fatalf("chunk %d: %v", n, err)
				}
				if !slices.Equal(evs, tt.want) {
					t.Errorf("chunk %d: events\n got %v\nwant %v", n, evs, tt.want)
				}
				if rest != tt.rest {
					t.Errorf("chunk %d: rest %q, want %q", n, rest, tt.rest)
				}
				if got := string(out) + rest; got != tt.in {
					t.Errorf("chunk %d: passthrough %q, want %q", n, got, tt.in)
				}
			}
		})
	}
}

func TestParserMaxEvent(t *testing.T) {
	in := []byte("data: ok\n\ndata: " + strings.Repeat("x", 100) + "\n\ndata: after\n\n")
	for _, n := range chunkSizes {
		p := Parser{MaxEvent: 50}
		var evs []rec
		fed, err := feedUntil(&p, in, n, func(e *Event) error {
			evs = append(evs, toRec(e))
			return nil
		})
		if !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("chunk %d: err %v", n, err)
		}
		if want := []rec{ev("data: ok\n\n", "<nil>", "ok")}; !slices.Equal(evs, want) {
			t.Errorf("chunk %d: events %v", n, evs)
		}
		if err := p.Feed([]byte("more"), nil); !errors.Is(err, ErrEventTooLarge) {
			t.Errorf("chunk %d: error not sticky: %v", n, err)
		}
		// Nothing is lost: what Rest holds plus what was not fed yet is the
		// stream from the oversized event on.
		if got, want := string(p.Rest())+string(in[fed:]), string(in[len("data: ok\n\n"):]); got != want {
			t.Errorf("chunk %d: rest %q, want %q", n, got, want)
		}
		if err := p.Feed([]byte("data: y\n\n"), func(*Event) error { return nil }); err != nil {
			t.Errorf("chunk %d: after Rest: %v", n, err)
		}
	}
}

func TestParserCallbackError(t *testing.T) {
	in := []byte("data: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4")
	stop := errors.New("stop")
	for _, n := range chunkSizes {
		var p Parser
		var got []string
		fed, err := feedUntil(&p, in, n, func(e *Event) error {
			got = append(got, string(e.Data))
			if string(e.Data) == "2" {
				return stop
			}
			return nil
		})
		if err != stop {
			t.Fatalf("chunk %d: err %v", n, err)
		}
		if !slices.Equal(got, []string{"1", "2"}) {
			t.Errorf("chunk %d: delivered %q", n, got)
		}
		if err := p.Feed([]byte("x"), nil); err != stop {
			t.Errorf("chunk %d: error not sticky: %v", n, err)
		}
		if err := p.Finish(nil); err != stop {
			t.Errorf("chunk %d: Finish after error: %v", n, err)
		}
		if got, want := string(p.Rest())+string(in[fed:]), "data: 3\n\ndata: 4"; got != want {
			t.Errorf("chunk %d: rest %q, want %q", n, got, want)
		}
	}
}

func TestParserFinish(t *testing.T) {
	tests := []struct {
		in   string
		want []rec
	}{
		{"data: [DONE]\n", []rec{ev("data: [DONE]\n", "<nil>", "[DONE]")}},
		{"data: [DONE]", []rec{ev("data: [DONE]", "<nil>", "[DONE]")}},
		{"event: e\ndata: x\r", []rec{ev("event: e\ndata: x\r", "e", "x")}},
		{"data: a\n\ndata: x\r\r", []rec{ev("data: a\n\n", "<nil>", "a"), ev("data: x\r\r", "<nil>", "x")}},
		{": ping", []rec{ev(": ping", "<nil>", "<nil>")}},
		{"data: a\n\n", []rec{ev("data: a\n\n", "<nil>", "a")}},
	}
	for _, tt := range tests {
		for _, n := range chunkSizes {
			var p Parser
			var evs []rec
			var err error
			in := []byte(tt.in)
			for i := 0; i < len(in) && err == nil; i += n {
				err = p.Feed(in[i:min(i+n, len(in))], func(e *Event) error {
					evs = append(evs, toRec(e))
					return nil
				})
			}
			if err == nil {
				err = p.Finish(func(e *Event) error {
					evs = append(evs, toRec(e))
					return nil
				})
			}
			if err != nil {
				t.Fatalf("%q chunk %d: %v", tt.in, n, err)
			}
			if !slices.Equal(evs, tt.want) {
				t.Errorf("%q chunk %d:\n got %v\nwant %v", tt.in, n, evs, tt.want)
			}
			if r := p.Rest(); r != nil {
				t.Errorf("%q chunk %d: Finish left %q", tt.in, n, r)
			}
		}
	}
}

func TestEventAppendTo(t *testing.T) {
	tests := []struct {
		name, data []byte
		want       string
	}{
		{[]byte("response.output_text.delta"), []byte(`{"delta":"x"}`), "event: response.output_text.delta\ndata: {\"delta\":\"x\"}\n\n"},
		{nil, []byte("[DONE]"), "data: [DONE]\n\n"},
		{nil, []byte("a\nb"), "data: a\ndata: b\n\n"},
		{nil, []byte("a\n"), "data: a\ndata: \n\n"},
		{nil, []byte(""), "data: \n\n"},
		{nil, []byte(" lead"), "data:  lead\n\n"},
		{nil, []byte("a\r\nb\rc"), "data: a\ndata: b\ndata: c\n\n"},
		{[]byte("x"), nil, "event: x\n\n"},
		{[]byte(""), nil, "event: \n\n"},
		{nil, nil, "\n"},
	}
	for _, tt := range tests {
		e := Event{Name: tt.name, Data: tt.data}
		got := string(e.AppendTo([]byte("prefix|")))
		if got != "prefix|"+tt.want {
			t.Errorf("AppendTo(%q, %q) = %q, want %q", tt.name, tt.data, got, "prefix|"+tt.want)
		}
		// What AppendTo writes parses back to the same event (CRs aside,
		// which the parser never puts into Data).
		var p Parser
		var back []rec
		if err := p.Feed([]byte(tt.want), func(e *Event) error { back = append(back, toRec(e)); return nil }); err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(tt.data, '\r') < 0 {
			want := rec{raw: tt.want, name: string(tt.name), nameNil: tt.name == nil, data: string(tt.data), dataNil: tt.data == nil}
			if len(back) != 1 || back[0] != want {
				t.Errorf("reparse of %q = %v, want %v", tt.want, back, want)
			}
		}
	}
	e := Event{Raw: []byte("event: a\ndata: b\n\n"), Name: []byte("ignored")}
	if got := string(e.AppendTo(nil)); got != "event: a\ndata: b\n\n" {
		t.Errorf("raw AppendTo = %q", got)
	}
}

func TestParserAllocs(t *testing.T) {
	stream := responsesStream(200)
	// Multi-line data and CRLF take the scratch and '\r' paths too.
	stream = append(stream, "data: a\r\ndata: b\r\n\r\n: keep-alive\n\n"...)
	for _, n := range chunkSizes {
		var p Parser
		var out []byte
		events := 0
		fn := func(e *Event) error {
			events++
			out = e.AppendTo(out[:0])
			return nil
		}
		feed := func() {
			for i := 0; i < len(stream); i += n {
				if err := p.Feed(stream[i:min(i+n, len(stream))], fn); err != nil {
					t.Fatal(err)
				}
			}
		}
		feed() // warm up the buffers
		if a := testing.AllocsPerRun(20, feed); a != 0 {
			t.Errorf("chunk %d: %v allocs per stream of %d bytes, want 0", n, a, len(stream))
		}
	}
}

// responsesStream returns a realistic Responses API stream of about n
// events: reasoning, a message with text deltas and a function call whose
// arguments stream in JSON fragments.
func responsesStream(n int) []byte {
	var b []byte
	seq := 0
	add := func(typ, rest string) {
		b = fmt.Appendf(b, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d%s}\n\n", typ, typ, seq, rest)
		seq++
	}
	add("response.created", `,"response":{"id":"resp_1","object":"response","created_at":1760000000,"status":"in_progress","model":"gpt-5.5","output":[],"usage":null}`)
	add("response.in_progress", `,"response":{"id":"resp_1","object":"response","created_at":1760000000,"status":"in_progress","model":"gpt-5.5","output":[],"usage":null}`)
	add("response.output_item.added", `,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}`)
	words := []string{"Let", " me", " look", " at", " the", " failing", " test", " first", ".", " The", " handler", " returns", " early", "\\n"}
	for i := 0; seq < n/2; i++ {
		add("response.output_text.delta", fmt.Sprintf(`,"item_id":"msg_1","output_index":0,"content_index":0,"delta":%q,"logprobs":[],"obfuscation":"aZ3k9Qp"`, words[i%len(words)]))
	}
	add("response.output_item.added", `,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_B","name":"apply_patch"}`)
	frags := []string{`{\"input\":\"*** Begin Patch\\n`, `*** Update File: caddy/handler.go\\n`, `@@ func (h *Handler) ServeHTTP\\n`, `-\\treturn nil\\n`, `+\\treturn h.next(w, r)\\n`, ` \\t}\\n`, `\\u00e9\\ud83e\\udd80 \\\"q\\\"\\n`}
	for i := 0; seq < n-2; i++ {
		add("response.function_call_arguments.delta", fmt.Sprintf(`,"item_id":"fc_1","output_index":1,"delta":"%s","obfuscation":"k2"`, frags[i%len(frags)]))
	}
	add("response.function_call_arguments.done", `,"item_id":"fc_1","output_index":1,"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** End Patch\\n\"}"`)
	add("response.completed", `,"response":{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":82,"output_tokens":17,"total_tokens":99}}`)
	return b
}

// TestRewrittenEventKeepsIDAndRetry: an event rewritten by a rule still
// tells the client its id and retry delay.
func TestRewrittenEventKeepsIDAndRetry(t *testing.T) {
	var p Parser
	var got []byte
	in := "id: 7\nretry: 3000\nevent: a\ndata: x\n\nid:\nretry: soon\ndata: y\n\nid: a\x00b\ndata: z\n\n"
	err := p.Feed([]byte(in), func(e *Event) error {
		c := *e
		c.Raw, c.Data = nil, append([]byte("new "), e.Data...)
		got = c.AppendTo(got)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// An empty id resets the client's last event id and so stays; a retry
	// that is not a number and an id with a NUL are what clients ignore.
	want := "event: a\nid: 7\nretry: 3000\ndata: new x\n\nid: \ndata: new y\n\ndata: new z\n\n"
	if string(got) != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	e := Event{ID: []byte("1\n2"), Retry: []byte("5"), Data: []byte("d")}
	if out := string(e.AppendTo(nil)); out != "retry: 5\ndata: d\n\n" {
		t.Fatalf("line break in id: %q", out)
	}
}

// Claim is offered each event that starts in a Feed's bytes without a
// '\r' in them, never the one completed from held bytes; what it takes
// skips fn, and its error stops Feed with the bytes after the event it
// took left for Rest.
func TestParserClaim(t *testing.T) {
	in := []byte("data: c1\n\ndata: 2\n\ndata: c3\n\ndata: bad\n\ndata: 5\n\n")
	stop := errors.New("stop")
	for _, n := range []int{1, 7, 11, len(in)} {
		var p Parser
		var delivered, claimed []string
		p.Claim = func(b []byte, i int) (int, error) {
			e := bytes.Index(b[i:], []byte("\n\n"))
			if e < 0 || b[i+6] != 'c' && b[i+6] != 'b' {
				return -1, nil
			}
			claimed = append(claimed, string(b[i+6:i+e]))
			if b[i+6] == 'b' {
				return i + e + 2, stop
			}
			return i + e + 2, nil
		}
		_, err := feedUntil(&p, in, n, func(e *Event) error {
			delivered = append(delivered, string(e.Data))
			return nil
		})
		// Whole in one Feed, the claimable events are claimed; cut in
		// small chunks, each event is completed from held bytes and
		// delivered instead.
		switch n {
		case len(in):
			if err != stop || !slices.Equal(claimed, []string{"c1", "c3", "bad"}) || !slices.Equal(delivered, []string{"2"}) {
				t.Fatalf("one chunk: err %v, claimed %q, delivered %q", err, claimed, delivered)
			}
			if got := string(p.Rest()); got != "data: 5\n\n" {
				t.Errorf("rest %q", got)
			}
		case 1, 7:
			if err != nil || len(claimed) != 0 || !slices.Equal(delivered, []string{"c1", "2", "c3", "bad", "5"}) {
				t.Fatalf("chunk %d: err %v, claimed %q, delivered %q", n, err, claimed, delivered)
			}
		}
	}
	var p Parser
	p.Claim = func([]byte, int) (int, error) { t.Fatal("offered an event of a chunk with a '\\r'"); return -1, nil }
	var got []string
	if err := p.Feed([]byte("data: c1\r\n\r\ndata: c2\n\n"), func(e *Event) error { got = append(got, string(e.Data)); return nil }); err != nil || !slices.Equal(got, []string{"c1", "c2"}) {
		t.Fatalf("with a CR: %v, %q", err, got)
	}
}

// feedUntil feeds in to p in chunks of n bytes until Feed fails, and
// returns how many bytes it fed and Feed's error.
func feedUntil(p *Parser, in []byte, n int, fn func(*Event) error) (fed int, err error) {
	for fed < len(in) && err == nil {
		chunk := in[fed:min(fed+n, len(in))]
		fed += len(chunk)
		err = p.Feed(chunk, fn)
	}
	return fed, err
}
