package messagesbridge

import (
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Anthropic's POST /v1/messages/count_tokens has no Chat Completions
// counterpart, and Claude Code calls it often (25 calls at once for
// /context, bursts at start-up): the bridge converts the request as it
// would send it, and the gateway answers {"input_tokens": N} itself from
// the Chat body the last rule left (after tools_filter, tools_plan and
// tools_normalize_schema), without calling the upstream. A 404 or a
// non-2xx would make Claude Code estimate on its own, but a 0 stops its
// auto-compact (anthropic-messages-bridge.md §11): N is never 0.
//
// N is an estimate, not a tokenizer's count (each upstream has its own
// tokenizer, and the gateway carries none). It reads the Chat body's
// input: the messages, the tools (and legacy functions) and the
// response_format; the model, max_tokens and the other knobs are not
// input and count nothing, so N holds for any model name. Over the text
// of those, as JSON escapes decode to, it counts in quarter tokens:
//
//   - a run of ASCII letters: one token per 6 letters, rounded up, a
//     lower-to-upper case change starting a new run (getUserName is
//     three): BPE vocabularies hold most words whole and split
//     identifiers at their parts;
//   - a run of digits: one token per 3 (BPE vocabularies split numbers
//     into groups of up to three digits);
//   - a run of ASCII punctuation: one token per 3 (`":"`, `"},{"`, `->`
//     are one or two tokens);
//   - a space a quarter token, a newline or tab half a token: BPE joins a
//     space to the word after it, and a run of them to one token;
//   - any other rune (CJK, kana, Hangul, emoji, accented and non-Latin
//     letters) one token: CJK is 0.6 to 1.5 tokens a character across
//     the tokenizers of the table, so this errs high;
//   - each image part 1600 tokens, whatever its data (base64 is never
//     counted as text): about what the vision models of the table bill a
//     megapixel image (Anthropic's (w·h)/750 gives 1590 for 1092×1092;
//     Kimi bills 1024 a picture, Qwen-VL up to 16384);
//   - each message 4 tokens besides its content (OpenAI's Chat format is
//     3 for the role and separators, and the role's name), and 3 for the
//     reply's start.
//
// Run costs are rounded up, so cutting a run in two never costs less
// than the whole; every other cost is per character or per part. Adding
// anything to the body therefore never lowers N (a larger request never
// gets a smaller count). The estimate errs high rather than low: a low
// one lets the conversation outgrow the upstream's window before Claude
// Code compacts it.

// counting reports whether the request is count_tokens (Claude Code's
// ?beta=true is in the query, not the path).
func counting(x *transforms.Exchange) bool {
	return strings.HasSuffix(strings.TrimSuffix(x.UpstreamPath(), "/"), "/messages/count_tokens")
}

// answerCount is count_tokens' answer for final, the Chat body every
// request phase produced.
func answerCount(final []byte) transforms.LocalAnswer {
	body := strconv.AppendInt([]byte(`{"input_tokens":`), int64(estimateTokens(final)), 10)
	return transforms.LocalAnswer{Status: http.StatusOK, ContentType: "application/json", Body: append(body, '}')}
}

// Costs in quarter tokens.
const (
	quarterMessage = 4 * 4
	quarterReply   = 3 * 4
	quarterImage   = 1600 * 4
	quarterSpace   = 1
	quarterBreak   = 2
	quarterRune    = 4
)

// estimateTokens is the documented estimate of the input tokens of a Chat
// Completions body: at least 1.
func estimateTokens(body []byte) int {
	var c tokenCounter
	start := -1
	if jsonspan.Valid(body) {
		start = jsonspan.SkipSpace(body, 0)
	}
	if start < 0 || body[start] != '{' {
		// Only the bridge's own output reaches here, which is an
		// object; anything else is counted as text, never as 0.
		c.text(body)
		return c.tokens()
	}
	c.q = quarterReply
	jsonspan.EachMember(body, start, func(m jsonspan.Member) bool {
		switch v := m.Value; {
		case m.KeyIs(body, "messages") && body[v.Start] == '[':
			jsonspan.EachElement(body, v.Start, func(e jsonspan.Span) bool {
				c.q += quarterMessage
				c.message(body, e)
				return true
			})
		case m.KeyIs(body, "tools"), m.KeyIs(body, "functions"), m.KeyIs(body, "response_format"):
			c.json(body[v.Start:v.End])
		}
		return true
	})
	return c.tokens()
}

// tokenCounter adds up quarter tokens over text, a run at a time.
type tokenCounter struct {
	q int
	// The run going on: its class (0 none, 'a' letters, '0' digits, '.'
	// punctuation), its length, and whether its last letter was lower
	// case.
	class byte
	run   int
	lower bool
}

func (c *tokenCounter) tokens() int {
	c.flush()
	return max(1, (c.q+3)/4)
}

// message counts one Chat message: its role is in quarterMessage, its
// content text by text (image parts at quarterImage), and the rest
// (reasoning_content, tool_calls, tool_call_id, name) as JSON.
func (c *tokenCounter) message(doc []byte, e jsonspan.Span) {
	if doc[e.Start] != '{' {
		c.json(doc[e.Start:e.End])
		return
	}
	jsonspan.EachMember(doc, e.Start, func(m jsonspan.Member) bool {
		v := m.Value
		switch {
		case m.KeyIs(doc, "role"):
		case doc[v.Start] == '"':
			c.text(inner(doc, v))
		case m.KeyIs(doc, "content") && doc[v.Start] == '[':
			var f [1]jsonspan.Span
			jsonspan.EachElement(doc, v.Start, func(p jsonspan.Span) bool {
				if doc[p.Start] == '{' {
					jsonspan.ObjectFields(doc, p.Start, []string{"type"}, f[:])
					if jsonspan.IsString(doc, f[0], "image_url") {
						c.flush()
						c.q += quarterImage
						return true
					}
				}
				c.json(doc[p.Start:p.End])
				return true
			})
		default:
			c.json(doc[v.Start:v.End])
		}
		c.flush() // values are apart: no run joins two
		return true
	})
}

// json counts a JSON value's text, its punctuation and its strings' quotes
// included, its white space between tokens not (upstreams render tool
// schemas their own way).
func (c *tokenCounter) json(v []byte) {
	for i := 0; i < len(v); {
		switch ch := v[i]; ch {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			c.ascii('"')
			e := jsonspan.StringEnd(v, i)
			c.text(v[i+1 : e-1])
			c.ascii('"')
			i = e
		default:
			c.ascii(ch)
			i++
		}
	}
}

// text counts the inside of a JSON string as escaped, its escapes counted
// as the characters they stand for.
func (c *tokenCounter) text(s []byte) {
	for i := 0; i < len(s); {
		ch := s[i]
		switch {
		case ch == '\\' && i+1 < len(s):
			i += 2
			switch e := s[i-1]; e {
			case 'n', 'r', 't':
				c.ascii('\n')
			case 'b', 'f':
				c.ascii(' ')
			case 'u':
				r := rune(0)
				for k := 0; k < 4 && i < len(s); k++ {
					r = r<<4 | rune(unhex(s[i]))
					i++
				}
				if r < utf8.RuneSelf {
					c.ascii(byte(r))
				} else {
					c.other()
				}
			default: // \" \\ \/
				c.ascii(e)
			}
		case ch < utf8.RuneSelf:
			c.ascii(ch)
			i++
		default:
			_, n := utf8.DecodeRune(s[i:])
			c.other()
			i += n
		}
	}
	c.flush()
}

func unhex(b byte) byte {
	switch {
	case b >= '0' && b <= '9':
		return b - '0'
	case b >= 'a' && b <= 'f':
		return b - 'a' + 10
	case b >= 'A' && b <= 'F':
		return b - 'A' + 10
	}
	return 0
}

// ascii counts one ASCII character.
func (c *tokenCounter) ascii(ch byte) {
	var class byte
	switch {
	case ch >= 'a' && ch <= 'z':
		class = 'a'
	case ch >= 'A' && ch <= 'Z':
		if c.class == 'a' && c.lower {
			c.flush() // getUser: get, User
		}
		class = 'a'
	case ch >= '0' && ch <= '9':
		class = '0'
	case ch == ' ':
		c.flush()
		c.q += quarterSpace
		return
	case ch <= ' ' || ch == 0x7f:
		c.flush()
		c.q += quarterBreak
		return
	default:
		class = '.'
	}
	if class != c.class {
		c.flush()
		c.class = class
	}
	c.run++
	c.lower = ch >= 'a' && ch <= 'z'
}

// other counts a rune past ASCII.
func (c *tokenCounter) other() {
	c.flush()
	c.q += quarterRune
}

// flush ends the run going on.
func (c *tokenCounter) flush() {
	per := 3
	if c.class == 'a' {
		per = 6
	}
	if c.run > 0 {
		c.q += 4 * ((c.run + per - 1) / per)
	}
	c.class, c.run, c.lower = 0, 0, false
}
