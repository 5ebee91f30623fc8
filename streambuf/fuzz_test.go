package streambuf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// splitter yields chunk sizes (1 to 16) taken from the bytes of sizes,
// cycling; no sizes means one chunk.
type splitter struct {
	sizes []byte
	k     int
}

func (s *splitter) split(b []byte, fn func([]byte)) {
	for len(b) > 0 {
		n := len(b)
		if len(s.sizes) > 0 {
			n = min(int(s.sizes[s.k%len(s.sizes)]%16)+1, len(b))
			s.k++
		}
		fn(b[:n])
		b = b[n:]
	}
}

func FuzzParser(f *testing.F) {
	f.Add([]byte("event: a\ndata: {\"x\":1}\n\n: ping\n\ndata: a\r\ndata: b\r\n\r\n"), []byte{0, 3, 7})
	f.Add([]byte("data: x\r\rdata: y\r\r\ndata\n\nretry: 5\n\n"), []byte{1})
	f.Add([]byte("\n\r\n\r\rdata: tail"), []byte{2, 0})
	f.Add(responsesStream(12), []byte{5, 11, 2})
	f.Add([]byte("id: 1\nretry: 300\nevent: a\ndata: b\n\nid:\ndata: c\n\n"), []byte{3})
	f.Add([]byte("event: a\ndata: 1\n\nevent: b\ndata: 2\n\ndata: 3\n\nevent: c\ndata: 4\ndata: 5\n\nevent: d\n\nevent: \ndata: \n\ndata: x\r\n\n"), []byte{0x85, 0x82, 7, 20})
	f.Add([]byte("event: a\ndata: 1\n\nevent: b\ndata: 2\n\nevent: c\ndata: 3"), []byte{0x81, 0x81, 2})
	f.Add([]byte("data: c1\n\ndata: 2\n\ndata: c3\n\ndata: c\ndata: 4\n\ndata: c5\n\n"), []byte{0x8f, 3, 0x8f})
	f.Fuzz(func(t *testing.T, in, sizes []byte) {
		checkParserAgainstRef(t, in, sizes)
		// The id and retry of each event, which a rewrite must keep.
		var fields []kept
		var p0 Parser
		_ = p0.Feed(in, func(e *Event) error {
			fields = append(fields, keptOf(e))
			return nil
		})
		collect := func(evs *[]rec, out *[]byte) func(*Event) error {
			return func(e *Event) error {
				*evs = append(*evs, toRec(e))
				*out = e.AppendTo(*out)
				return nil
			}
		}
		var whole, chunked []rec
		var wholeOut, chunkedOut []byte
		var p Parser
		if err := p.Feed(in, collect(&whole, &wholeOut)); err != nil {
			t.Fatal(err)
		}
		wholeRest := string(p.Rest())
		sp := splitter{sizes: sizes}
		sp.split(in, func(c []byte) {
			if err := p.Feed(c, collect(&chunked, &chunkedOut)); err != nil {
				t.Fatal(err)
			}
		})
		chunkedRest := string(p.Rest())
		if !slices.Equal(whole, chunked) || wholeRest != chunkedRest {
			t.Fatalf("whole and chunked differ:\n%v %q\n%v %q", whole, wholeRest, chunked, chunkedRest)
		}
		if got := string(wholeOut) + wholeRest; got != string(in) {
			t.Fatalf("passthrough %q, want %q", got, in)
		}
		// A Claim that takes the events of one simple shape, finding their
		// end as the parser does, changes neither the events nor the bytes:
		// those it takes are what the parser would have delivered.
		var claimed []rec
		var claimedOut []byte
		pc := Parser{Claim: func(b []byte, i int) (int, error) {
			e := b[i:]
			n := bytes.IndexByte(e, '\n')
			if !bytes.HasPrefix(e, []byte("data: c")) || n < 0 || n+1 == len(e) || e[n+1] != '\n' {
				return -1, nil
			}
			claimed = append(claimed, rec{raw: string(e[:n+2]), nameNil: true, data: string(e[6:n])})
			claimedOut = append(claimedOut, e[:n+2]...)
			return i + n + 2, nil
		}}
		sp = splitter{sizes: sizes}
		sp.split(in, func(c []byte) {
			if err := pc.Feed(c, collect(&claimed, &claimedOut)); err != nil {
				t.Fatal(err)
			}
		})
		if !slices.Equal(claimed, chunked) || string(claimedOut) != string(chunkedOut) || string(pc.Rest()) != chunkedRest {
			t.Fatalf("with claims:\n%v %q\nwithout:\n%v %q", claimed, pc.Rest(), chunked, chunkedRest)
		}
		// Modified events serialise to text that parses back to the same
		// name and data.
		var ser []byte
		for i, r := range whole {
			e := Event{}
			if k := fields[i]; k.id != nil {
				e.ID = []byte(*k.id)
			}
			if k := fields[i]; k.retry != nil {
				e.Retry = []byte(*k.retry)
			}
			if !r.nameNil {
				e.Name = []byte(r.name)
			}
			if !r.dataNil {
				e.Data = []byte(r.data)
			}
			ser = e.AppendTo(ser)
		}
		var back []rec
		var backFields []kept
		if err := p.Feed(ser, func(e *Event) error {
			back = append(back, toRec(e))
			backFields = append(backFields, keptOf(e))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if rest := p.Rest(); len(rest) > 0 || len(back) != len(whole) {
			t.Fatalf("reparse: %d events, rest %q; want %d events", len(back), rest, len(whole))
		}
		for i := range back {
			a, b := back[i], whole[i]
			if a.name != b.name || a.nameNil != b.nameNil || a.data != b.data || a.dataNil != b.dataNil {
				t.Fatalf("reparse #%d: %v, want %v", i, a, b)
			}
			if f, g := fields[i], backFields[i]; !sameField(f.id, g.id) || !sameField(f.retry, g.retry) {
				t.Fatalf("reparse #%d: id/retry %v %v, want %v %v", i, g.id, g.retry, f.id, f.retry)
			}
		}
	})
}

func FuzzArgsDecoder(f *testing.F) {
	f.Add([]byte(`{"input":"*** Begin Patch\n*** End Patch\n"}`), []byte{0, 4})
	f.Add([]byte(`{"a":[{"input":"x"}],"inp\u0075t":"\u00e9\ud83e\udd80\ud83e\u0041\udd80"}`), []byte{1, 2, 3})
	f.Add([]byte("{\"input\":\"a\xffb\xe2\x82\"}"), []byte{})
	f.Add([]byte(`{"input":1,"input":"second"}`), []byte{6})
	f.Add(patchArgs(3), []byte{9, 1})
	f.Fuzz(func(t *testing.T, in, sizes []byte) {
		checkArgs(t, in, sizes)
		// Random bytes are rarely valid JSON, so also check an object that
		// always is, with in as the input text written with all kinds of
		// escapes.
		text := argsFrom(in)
		if _, ok := jsonInput(text); !ok {
			t.Fatalf("argsFrom(%q) = %q: not a valid object with a string input", in, text)
		}
		checkArgs(t, text, sizes)
	})
}

// argsFrom builds valid function call arguments whose "input" string holds
// in, written with a mix of escapes chosen by in's own bytes.
func argsFrom(in []byte) []byte {
	prefixes := []string{``, `"x":{"input":"no","y":[1,"]"]},`, `"input":5,"n":null,`, `"inp\u0075":"q", "a" : [ ] ,`}
	b := []byte(" {" + prefixes[len(in)%len(prefixes)] + `"inp\u0075t":"`)
	for i, c := range in {
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '~':
			b = append(b, `\uD83E\udd80`...) // pair, mixed case
		case c == '^':
			b = append(b, `\ud83e`...) // high surrogate, alone unless followed by one
		case c == '`':
			b = append(b, `\udd80`...) // low surrogate
		case c == '|':
			b = append(b, `\u00e9\/`...)
		case c < 0x20 && i%2 == 0:
			b = fmt.Appendf(b, `\u%04X`, c)
		case c < 0x20:
			q := jsonspan.AppendString(nil, []byte{c}) // short or lowercase form
			b = append(b, q[1:len(q)-1]...)
		default:
			b = append(b, c)
		}
	}
	return append(b, `" }`...)
}

// checkArgs decodes in whole and split by sizes and compares the results
// with each other and, for valid JSON, with encoding/json.
func checkArgs(t *testing.T, in, sizes []byte) {
	var d ArgsDecoder
	whole, err := d.Write(in)
	if err != nil {
		t.Fatal(err)
	}
	w := string(whole)
	wStreaming, wComplete, wFailed := d.Streaming(), d.InputComplete(), d.Failed()

	d.Reset()
	var got []byte
	sp := splitter{sizes: sizes}
	sp.split(in, func(c []byte) {
		dec, err := d.Write(c)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, dec...)
	})
	// Splitting never changes the outcome, valid JSON or not.
	if string(got) != w || d.Streaming() != wStreaming || d.InputComplete() != wComplete || d.Failed() != wFailed {
		t.Fatalf("split %q: %q %v/%v/%v; whole: %q %v/%v/%v", in, got,
			d.Streaming(), d.InputComplete(), d.Failed(), w, wStreaming, wComplete, wFailed)
	}
	// AppendWrite appends what Write returns.
	d2 := ArgsDecoder{}
	app := []byte("x")
	sp = splitter{sizes: sizes}
	sp.split(in, func(c []byte) {
		var err error
		if app, err = d2.AppendWrite(app, c); err != nil {
			t.Fatal(err)
		}
	})
	if string(app) != "x"+string(got) || d2.InputComplete() != d.InputComplete() || d2.Failed() != d.Failed() {
		t.Fatalf("AppendWrite %q: %q %v/%v; Write %q %v/%v", in, app, d2.InputComplete(), d2.Failed(), got, d.InputComplete(), d.Failed())
	}
	// AppendWriteQuoted takes each fragment as a delta's JSON string,
	// inside an event, and decodes what AppendWrite does.
	d3 := ArgsDecoder{}
	quoted := []byte("x")
	sp = splitter{sizes: sizes}
	sp.split(in, func(c []byte) {
		// Escaped by hand: other bytes stay as they are, even in a rune
		// the split cut, which AppendString would replace.
		doc := []byte(`{"delta":"`)
		for _, b := range c {
			switch {
			case b == '"' || b == '\\':
				doc = append(doc, '\\', b)
			case b < 0x20:
				doc = fmt.Appendf(doc, `\u%04x`, b)
			default:
				doc = append(doc, b)
			}
		}
		doc = append(doc, '"')
		at := len(`{"delta":`)
		doc = append(doc, `,"obfuscation":"a\"b"}`...)
		var err error
		var end int
		if quoted, end, err = d3.AppendWriteQuoted(quoted, doc, at); err != nil || end != len(doc)-len(`,"obfuscation":"a\"b"}`) {
			t.Fatalf("AppendWriteQuoted(%q): end %d, %v", doc, end, err)
		}
	})
	if string(quoted) != string(app) || !bytes.Equal(d3.Raw(), in) || d3.InputComplete() != d.InputComplete() || d3.Failed() != d.Failed() {
		t.Fatalf("AppendWriteQuoted %q: %q raw %q %v/%v; AppendWrite %q", in, quoted, d3.Raw(), d3.InputComplete(), d3.Failed(), app)
	}
	if !bytes.Equal(d.Raw(), in) {
		t.Fatalf("Raw %q, want %q", d.Raw(), in)
	}
	if !utf8.Valid(got) {
		t.Fatalf("invalid UTF-8 output %q", got)
	}
	// A complete input was checked as it was decoded: the whole text is
	// valid JSON exactly when it is with that string emptied.
	if d.InputComplete() && !d.Failed() {
		start, end := d.InputSpan()
		if in[start] != '"' || in[end-1] != '"' {
			t.Fatalf("%q: InputSpan %d:%d is not the literal", in, start, end)
		}
		around := append(append(append([]byte{}, in[:start]...), '"', '"'), in[end:]...)
		if a, b := jsonspan.Valid(bytes.TrimSpace(in)), jsonspan.Valid(bytes.TrimSpace(around)); a != b {
			t.Fatalf("%q: Valid %v, but %v with the input emptied", in, a, b)
		}
	}
	if want, ok := jsonInput(in); ok {
		if string(got) != want || !d.InputComplete() || d.Failed() {
			t.Fatalf("%q: decoded %q (complete %v), encoding/json %q", in, got, d.InputComplete(), want)
		}
	} else if json.Valid(in) && (d.Streaming() || len(got) > 0) {
		t.Fatalf("%q: valid JSON without a string input decoded %q", in, got)
	}
}

// kept is the id and retry of an event, nil when absent.
type kept struct{ id, retry *string }

func keptOf(e *Event) kept {
	var k kept
	if e.ID != nil {
		k.id = new(string(e.ID))
	}
	if e.Retry != nil {
		k.retry = new(string(e.Retry))
	}
	return k
}

func sameField(a, b *string) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// parserUnderTest is what the differential check drives: Parser and the
// reference refParser.
type parserUnderTest interface {
	Feed(b []byte, fn func(*Event) error) error
	Rest() []byte
	Finish(fn func(*Event) error) error
}

// parserTrace feeds in split by sizes and records everything a caller can
// observe: each event with its id and retry, each Feed's error, Rest after
// an error (after which feeding goes on, as the parser is reset), and at
// the end Finish's events or Rest. The callback fails on event number
// failAt (never when negative), and scribbles over every field of each
// event after recording it, as fn may modify the event it is given.
func parserTrace(p parserUnderTest, in, sizes []byte, failAt int, finish bool) string {
	var tr strings.Builder
	n := 0
	fail := errors.New("stop")
	fn := func(e *Event) error {
		k := keptOf(e)
		fmt.Fprintf(&tr, "%v id=%v retry=%v\n", toRec(e), deref(k.id), deref(k.retry))
		*e = Event{Raw: []byte("x"), Name: []byte("n"), Data: []byte("d"), ID: []byte("i"), Retry: []byte("9")}
		n++
		if n-1 == failAt {
			return fail
		}
		return nil
	}
	sp := splitter{sizes: sizes}
	sp.split(in, func(c []byte) {
		if err := p.Feed(c, fn); err != nil {
			fmt.Fprintf(&tr, "err %v rest %q\n", err, p.Rest())
		}
	})
	if finish {
		fmt.Fprintf(&tr, "finish %v\n", p.Finish(fn))
	}
	fmt.Fprintf(&tr, "rest %q\n", p.Rest())
	return tr.String()
}

func deref(s *string) string {
	if s == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", *s)
}

// checkParserAgainstRef compares Parser with refParser on in, with
// MaxEvent, the failing event and Finish chosen by sizes' first bytes.
func checkParserAgainstRef(t *testing.T, in, sizes []byte) {
	maxEvent, failAt := 0, -1
	if len(sizes) > 0 && sizes[0]&0x80 != 0 {
		maxEvent = int(sizes[0]&0x3f) * 4
	}
	if len(sizes) > 1 && sizes[1]&0x80 != 0 {
		failAt = int(sizes[1] & 0x7)
	}
	for _, finish := range []bool{false, true} {
		for _, sz := range [][]byte{nil, sizes} {
			got := parserTrace(&Parser{MaxEvent: maxEvent}, in, sz, failAt, finish)
			want := parserTrace(&refParser{MaxEvent: maxEvent}, in, sz, failAt, finish)
			if got != want {
				t.Fatalf("MaxEvent %d, failAt %d, finish %v, sizes %v:\ngot:\n%s\nreference:\n%s", maxEvent, failAt, finish, sz, got, want)
			}
		}
	}
}
