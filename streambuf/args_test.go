package streambuf

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// decodeChunks writes in to d in fragments of size n and returns the
// concatenated decoded text.
func decodeChunks(t testing.TB, d *ArgsDecoder, in []byte, n int) string {
	t.Helper()
	var out []byte
	for i := 0; i < len(in); i += n {
		dec, err := d.Write(in[i:min(i+n, len(in))])
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
		out = append(out, dec...)
	}
	return string(out)
}

func TestArgsDecoder(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      string
		streaming bool
		complete  bool
		failed    bool
	}{
		{"patch", `{"input":"*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"}`,
			"*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n", true, true, false},
		{"leading whitespace", " \t\r\n{ \"input\" : \"v\" } ", "v", true, true, false},
		{"all short escapes", `{"input":"\"\\\/\b\f\n\r\t"}`, "\"\\/\b\f\n\r\t", true, true, false},
		{"unicode escapes", `{"input":"\u00e9\u00E9\ud83e\udd80\u0000x"}`, "éé🦀\x00x", true, true, false},
		{"raw utf-8", `{"input":"héllo 🦀 世界"}`, "héllo 🦀 世界", true, true, false},
		{"lone high surrogate at end", `{"input":"\ud83e"}`, "\uFFFD", true, true, false},
		{"lone low surrogate", `{"input":"\udd80x"}`, "\uFFFDx", true, true, false},
		{"high surrogate then bmp", `{"input":"\ud83e\u0041"}`, "\uFFFDA", true, true, false},
		{"high surrogate twice", `{"input":"\ud83e\ud83e\udd80"}`, "\uFFFD🦀", true, true, false},
		{"high surrogate then text", `{"input":"\ud83eab"}`, "\uFFFDab", true, true, false},
		{"high surrogate then short escape", `{"input":"\ud83e\n"}`, "\uFFFD\n", true, true, false},
		{"invalid utf-8", "{\"input\":\"a\xffb\xe2\x82\"}", "a\uFFFDb\uFFFD\uFFFD", true, true, false},
		{"utf-8 surrogate bytes", "{\"input\":\"\xed\xa0\x80\"}", "\uFFFD\uFFFD\uFFFD", true, true, false},
		{"empty input", `{"input":""}`, "", true, true, false},
		{"other keys first", `{"a":{"input":"no","x":[1,{"y":"}"}]},"b":[1,"x\"y]",{"c":[]}],"n":-1.5e3,"t":true,"z":null,"s":"in\"put","input":"yes"}`,
			"yes", true, true, false},
		{"escaped key", `{"inp\u0075t":"yes"}`, "yes", true, true, false},
		{"key is exact", `{"Input":"no","input ":"no","inputs":"no"}`, "", false, false, false},
		{"non-string input then string", `{"input":1,"input":["x"],"input":"x"}`, "x", true, true, false},
		{"first string wins", `{"input":"a","input":"b"}`, "a", true, true, false},
		{"input null", `{"input":null}`, "", false, false, false},
		{"not an object", `["input","x"]`, "", false, false, false},
		{"string top level", `"input"`, "", false, false, false},
		{"empty object", `{}`, "", false, false, false},
		{"invalid escape stops", `{"input":"ab\qcd"}`, "ab", true, false, true},
		{"single quote escape is invalid", `{"input":"ab\'cd"}`, "ab", true, false, true},
		{"bad hex stops", `{"input":"ab\u12x4cd"}`, "ab", true, false, true},
		{"raw control char stops", "{\"input\":\"a\nb\"}", "a", true, false, true},
		{"unterminated", `{"input":"abc`, "abc", true, false, false},
		{"half escape pending", `{"input":"abc\`, "abc", true, false, false},
		{"half unicode escape pending", `{"input":"abc\u00`, "abc", true, false, false},
		{"pending high surrogate", `{"input":"abc\ud83e\udd`, "abc", true, false, false},
		{"missing colon", `{"input" "x"}`, "", false, false, true},
		{"missing comma", `{"a":1 "input":"x"}`, "", false, false, true},
		{"trailing comma", `{"a":1,}`, "", false, false, true},
		{"mismatched bracket", `{"a":[1},"input":"x"}`, "", false, false, true},
		{"garbage after input ignored", `{"input":"x"}garbage`, "x", true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d ArgsDecoder
			for _, n := range chunkSizes {
				d.Reset()
				got := decodeChunks(t, &d, []byte(tt.in), n)
				if got != tt.want {
					t.Errorf("chunk %d: decoded %q, want %q", n, got, tt.want)
				}
				if d.Streaming() != tt.streaming || d.InputComplete() != tt.complete || d.Failed() != tt.failed {
					t.Errorf("chunk %d: streaming/complete/failed = %v/%v/%v, want %v/%v/%v", n,
						d.Streaming(), d.InputComplete(), d.Failed(), tt.streaming, tt.complete, tt.failed)
				}
				if string(d.Raw()) != tt.in {
					t.Errorf("chunk %d: Raw %q", n, d.Raw())
				}
				// Where the text is valid JSON, encoding/json agrees.
				if want, ok := jsonInput([]byte(tt.in)); ok && (got != want || !d.InputComplete()) {
					t.Errorf("chunk %d: decoded %q, encoding/json %q", n, got, want)
				}
			}
		})
	}
}

// TestArgsDecoderSteps checks what each Write returns while escapes and
// UTF-8 sequences are split across fragments.
func TestArgsDecoderSteps(t *testing.T) {
	tests := []struct {
		frags []string
		want  []string
	}{
		{[]string{`{"inp`, `ut":`, ` "a\`, `n`, `b"}`}, []string{"", "", "a", "\n", "b"}},
		{[]string{`{"input":"\u00`, `e9`, `x`}, []string{"", "é", "x"}},
		{[]string{`{"input":"\ud83e`, `\udd80`}, []string{"", "🦀"}},
		{[]string{`{"input":"\ud83e`, `\`, `u`, `d`, `d80!`}, []string{"", "", "", "", "🦀!"}},
		{[]string{`{"input":"\ud83e`, `"`}, []string{"", "\uFFFD"}},
		{[]string{"{\"input\":\"\xf0\x9f", "\xa6\x80"}, []string{"", "🦀"}},
		{[]string{"{\"input\":\"\xe2\x82", "A"}, []string{"", "\uFFFD\uFFFDA"}},
		{[]string{`{"x":"\`, `"","input":"ok"}`}, []string{"", "ok"}},
	}
	for _, tt := range tests {
		var d ArgsDecoder
		for i, f := range tt.frags {
			got, err := d.Write([]byte(f))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want[i] {
				t.Errorf("%q: Write #%d = %q, want %q", tt.frags, i, got, tt.want[i])
			}
		}
	}
}

func TestArgsDecoderLimit(t *testing.T) {
	d := ArgsDecoder{Limit: 12}
	if got, err := d.Write([]byte(`{"input":"ab`)); err != nil || string(got) != "ab" {
		t.Fatalf("Write = %q, %v", got, err)
	}
	if _, err := d.Write([]byte(`c`)); !errors.Is(err, ErrLimit) {
		t.Fatalf("over limit: %v", err)
	}
	if _, err := d.Write(nil); !errors.Is(err, ErrLimit) {
		t.Errorf("error not sticky: %v", err)
	}
	if string(d.Raw()) != `{"input":"ab` {
		t.Errorf("Raw = %q", d.Raw())
	}
	d.Reset()
	if d.Limit != 12 || len(d.Raw()) != 0 || d.Streaming() || d.InputComplete() {
		t.Errorf("Reset left state: %+v", d)
	}
	if got, err := d.Write([]byte(`{"input":"x"}`)); err == nil || len(got) != 0 {
		t.Errorf("13 bytes under limit 12: %q, %v", got, err)
	}
}

func TestArgsDecoderAppendWrite(t *testing.T) {
	d := ArgsDecoder{Limit: 20}
	dst := []byte("pre:")
	var err error
	for _, f := range []string{`{"inp`, `ut":"a\`, `"b\u00`, `e9`} {
		if dst, err = d.AppendWrite(dst, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	if string(dst) != `pre:a"bé` || string(d.Raw()) != `{"input":"a\"b\u00e9` {
		t.Fatalf("AppendWrite: %q, Raw %q", dst, d.Raw())
	}
	got, err := d.AppendWrite(dst, []byte(`"}`))
	if !errors.Is(err, ErrLimit) || string(got) != string(dst) {
		t.Fatalf("over limit: %q, %v", got, err)
	}
	if got, err := d.AppendWrite(nil, nil); !errors.Is(err, ErrLimit) || got != nil {
		t.Errorf("error not sticky: %q, %v", got, err)
	}
}

// AppendWriteQuoted takes a delta's literal out of its event; a literal the
// event does not finish, or one over the limit, is not recorded.
func TestArgsDecoderAppendWriteQuoted(t *testing.T) {
	d := ArgsDecoder{Limit: 20}
	dst := []byte("pre:")
	for _, f := range []string{`{"inp`, `ut":"a\`, `"b\u00`, `e9`} {
		doc := append(jsonspan.AppendString([]byte(`{"delta":`), []byte(f)), `,"obfuscation":"x"}`...)
		var end int
		var err error
		if dst, end, err = d.AppendWriteQuoted(dst, doc, len(`{"delta":`)); err != nil || end != len(doc)-len(`,"obfuscation":"x"}`) {
			t.Fatalf("%s: end %d, %v", doc, end, err)
		}
	}
	if string(dst) != `pre:a"bé` || string(d.Raw()) != `{"input":"a\"b\u00e9` {
		t.Fatalf("AppendWriteQuoted: %q, Raw %q", dst, d.Raw())
	}
	if got, end, err := d.AppendWriteQuoted(dst, []byte(`"x`), 0); err != nil || end != -1 || string(got) != string(dst) || len(d.Raw()) != 20 {
		t.Fatalf("unfinished literal: %q, %d, %v, Raw %q", got, end, err, d.Raw())
	}
	got, end, err := d.AppendWriteQuoted(dst, []byte(`"\"}"`), 0)
	if !errors.Is(err, ErrLimit) || end != 5 || string(got) != string(dst) || len(d.Raw()) != 20 {
		t.Fatalf("over limit: %q, %d, %v, Raw %q", got, end, err, d.Raw())
	}
	if _, _, err := d.AppendWriteQuoted(nil, []byte(`""`), 0); !errors.Is(err, ErrLimit) {
		t.Errorf("error not sticky: %v", err)
	}
}

// TestValidUTF8 checks unquote's inlined UTF-8 check against
// utf8.DecodeRune for every lead and second byte, with continuation bytes
// at their limits, and for sequences cut short.
func TestValidUTF8(t *testing.T) {
	tails := []byte{0x00, 'a', 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xff}
	for c0 := 0x80; c0 < 0x100; c0++ {
		for c1 := range 0x100 {
			for _, c2 := range tails {
				for _, c3 := range tails {
					full := []byte{byte(c0), byte(c1), c2, c3}
					for n := 1; n <= 4; n++ {
						s := full[:n]
						want := 0
						if r, size := utf8.DecodeRune(s); size > 1 || r != utf8.RuneError {
							want = size
						}
						if got := validUTF8(s); got != want {
							t.Fatalf("validUTF8(% x) = %d, want %d", s, got, want)
						}
					}
				}
			}
		}
	}
}

func TestArgsDecoderAllocs(t *testing.T) {
	args := patchArgs(2000)
	var d ArgsDecoder
	run := func() {
		d.Reset()
		for i := 0; i < len(args); i += 7 {
			if _, err := d.Write(args[i:min(i+7, len(args))]); err != nil {
				t.Fatal(err)
			}
		}
		if !d.InputComplete() {
			t.Fatal("input not complete")
		}
	}
	run()
	if a := testing.AllocsPerRun(20, run); a != 0 {
		t.Errorf("%v allocs per call, want 0", a)
	}
}

// jsonInput returns what encoding/json decodes for the first top-level
// "input" key whose value is a string, when text is a valid JSON object.
func jsonInput(text []byte) (string, bool) {
	if !json.Valid(text) {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", false
		}
		if tok == "input" && v[0] == '"' {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return "", false
			}
			return s, true
		}
	}
	return "", false
}

// patchArgs returns function call arguments carrying an apply_patch input
// of about n lines.
func patchArgs(n int) []byte {
	var patch strings.Builder
	patch.WriteString("*** Begin Patch\n*** Update File: caddyhttp/handler.go\n")
	lines := []string{
		"@@ func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) error {\n",
		"-\tif err := h.validate(r); err != nil {\n",
		"+\tif err := h.validate(r); err != nil && !errors.Is(err, errSkip) {\n",
		" \t\treturn caddyhttp.Error(http.StatusBadRequest, err)\n",
		"+\t// Sentinel “quotes” <tags> & unicode: é 🦀 \"escaped\" \\ path\n",
	}
	for i := 0; i < n; i++ {
		patch.WriteString(lines[i%len(lines)])
	}
	patch.WriteString("*** End Patch\n")
	args, err := json.Marshal(map[string]string{"input": patch.String()})
	if err != nil {
		panic(err)
	}
	return args
}

// Cut anywhere, a delta of these arguments is decoded in AppendWriteQuoted's
// one pass through both levels of escaping, or stops it on the way: at an
// escape of the arguments cut in two, at a \u escape, at invalid UTF-8, at
// the end of the input string. Wherever the cuts fall, it decodes what
// AppendWrite does.
func TestArgsDecoderQuotedEveryCut(t *testing.T) {
	args := "{\"input\":\"a\\\"b\\\\c\\nd\\t é 🦀 \\u00e9\\/ \xff \\\\\\\"x\",\"k\":1}"
	deltaDoc := func(p string) []byte {
		doc := []byte(`{"delta":"`)
		for _, b := range []byte(p) {
			if b == '"' || b == '\\' {
				doc = append(doc, '\\')
			}
			doc = append(doc, b)
		}
		return append(doc, `","obfuscation":"x\\y"}`...)
	}
	for i := 0; i <= len(args); i++ {
		for j := i; j <= len(args); j++ {
			var want, got ArgsDecoder
			var wantOut, gotOut []byte
			for _, p := range []string{args[:i], args[i:j], args[j:]} {
				wantOut, _ = want.AppendWrite(wantOut, []byte(p))
				doc := deltaDoc(p)
				var end int
				var err error
				if gotOut, end, err = got.AppendWriteQuoted(gotOut, doc, len(`{"delta":`)); err != nil || end != len(doc)-len(`,"obfuscation":"x\\y"}`) {
					t.Fatalf("cuts %d, %d: %s: end %d, %v", i, j, doc, end, err)
				}
			}
			if string(gotOut) != string(wantOut) || string(got.Raw()) != args || got.InputComplete() != want.InputComplete() || got.Failed() != want.Failed() {
				t.Fatalf("cuts %d, %d: %q, Raw %q, complete %v; AppendWrite: %q, complete %v", i, j, gotOut, got.Raw(), got.InputComplete(), wantOut, want.InputComplete())
			}
		}
	}
	var d ArgsDecoder
	out, _ := d.Write([]byte(args))
	if string(out) != "a\"b\\c\nd\t é 🦀 é/ \ufffd \\\"x" || !d.InputComplete() {
		t.Fatalf("Write: %q", out)
	}
}
