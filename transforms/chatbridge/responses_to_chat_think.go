package chatbridge

import (
	"bytes"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// Providers without a reasoning parser (self-hosted vLLM or SGLang, GLM's
// vision models) put the model's thinking at the head of the content,
// between <think> and </think>. The bridge takes it out as reasoning, on
// streams and in JSON, when the content begins with the tag; content that
// does not is text as it came.

// The tags as they may appear in a JSON string: plainly, or with < and >
// escaped the way Go's encoder writes them.
var (
	thinkOpen  = []string{"<think>", `\u003cthink\u003e`}
	thinkClose = []string{"</think>", `\u003c/think\u003e`}
)

// thinkSplit is the streamed content's state: undecided until it is known
// whether the content opens with <think>, then inside the thinking, then
// plain text.
type thinkSplit struct {
	state   byte   // 0 undecided, 't' thinking, 'm' message text
	pending []byte // escaped content held back: a tag may be under way
	lead    int    // bytes of pending already known to be leading white space
	after   bool   // thinking just closed: white space before the text goes
}

// content routes an escaped content delta: to the reasoning item while
// inside <think>, to the message otherwise. Only what can no longer be
// part of a tag is let out, and never half an escape.
func (s *chatToResponses) content(emit transforms.Emit, esc []byte) error {
	t := &s.think
	if t.state == 'm' {
		if t.after {
			if esc = trimEscapedSpace(esc); len(esc) == 0 {
				return nil
			}
			t.after = false
		}
		return s.text(emit, 'm', esc)
	}
	t.pending = append(t.pending, esc...)
	if t.state == 0 {
		// White space already seen is not looked at again.
		lead := trimEscapedSpace(t.pending[t.lead:])
		t.lead = len(t.pending) - len(lead)
		switch open, full := tagAt(lead, thinkOpen); {
		case full:
			t.state = 't'
			t.pending = append(t.pending[:0], lead[open:]...)
		case open > 0 || len(lead) == 0:
			return nil // still perhaps "<thi…", or only white space so far
		default:
			t.state = 'm'
			p := t.pending
			t.pending = nil
			return s.text(emit, 'm', p)
		}
	}
	// Inside the thinking: up to a closing tag is reasoning.
	for _, tag := range thinkClose {
		if i := indexOnBoundary(t.pending, tag); i >= 0 {
			reasoning, rest := t.pending[:i], trimEscapedSpace(t.pending[i+len(tag):])
			t.state = 'm'
			t.pending = nil
			t.after = len(rest) == 0
			if len(reasoning) > 0 {
				if err := s.text(emit, 'r', reasoning); err != nil {
					return err
				}
			}
			if len(rest) > 0 {
				return s.text(emit, 'm', rest)
			}
			return nil
		}
	}
	keep := 0 // the longest tail that could begin a closing tag
	for _, tag := range thinkClose {
		for k := min(len(tag)-1, len(t.pending)); k > keep; k-- {
			if strings.HasPrefix(tag, string(t.pending[len(t.pending)-k:])) {
				keep = k
				break
			}
		}
	}
	cut := escapeSafeCut(t.pending, len(t.pending)-keep)
	if cut == 0 {
		return nil
	}
	out := t.pending[:cut]
	t.pending = append([]byte(nil), t.pending[cut:]...)
	return s.text(emit, 'r', out)
}

// flushThink lets out what is held when the content ends: an unclosed
// <think> is reasoning, an undecided head is text.
func (s *chatToResponses) flushThink(emit transforms.Emit) error {
	t := &s.think
	p := t.pending
	t.pending = nil
	if len(p) == 0 {
		return nil
	}
	if t.state == 't' {
		return s.text(emit, 'r', p)
	}
	t.state = 'm'
	return s.text(emit, 'm', p)
}

// indexOnBoundary finds tag in the escaped text b where it starts a
// character, not inside an escape ("\\u003c" is a backslash and "u003c").
// The walk over the escapes only moves forward, from one match to the
// next, so a text full of false matches costs one pass.
func indexOnBoundary(b []byte, tag string) int {
	at := 0 // the start of a character
	for from := 0; ; {
		i := bytes.Index(b[from:], []byte(tag))
		if i < 0 {
			return -1
		}
		i += from
		for at < i {
			at += escapeLen(b, at)
		}
		if at == i {
			return i
		}
		from = i + 1
	}
}

// escapeLen is the length of the character at i of the escaped text b:
// 6 for a \u escape, 2 for another, 1 for a plain byte.
func escapeLen(b []byte, i int) int {
	switch {
	case b[i] != '\\':
		return 1
	case i+1 < len(b) && b[i+1] == 'u':
		return 6
	}
	return 2
}

// tagAt reports how much of one of the tags the text begins with: the
// tag's length and true when it holds all of it, the length of a partial
// match otherwise (0 for none).
func tagAt(text []byte, tags []string) (int, bool) {
	best := 0
	for _, tag := range tags {
		if bytes.HasPrefix(text, []byte(tag)) {
			return len(tag), true
		}
		if len(text) < len(tag) && strings.HasPrefix(tag, string(text)) {
			best = max(best, len(text))
		}
	}
	return best, false
}

// trimEscapedSpace drops leading white space, written plainly or escaped.
func trimEscapedSpace(b []byte) []byte {
	for {
		switch {
		case len(b) > 0 && (b[0] == ' ' || b[0] == '\t'):
			b = b[1:]
		case len(b) > 1 && b[0] == '\\' && (b[1] == 'n' || b[1] == 'r' || b[1] == 't'):
			b = b[2:]
		default:
			return b
		}
	}
}

// escapeSafeCut returns the largest cut at most n that does not split an
// escape sequence of the escaped JSON string text b.
func escapeSafeCut(b []byte, n int) int {
	safe := 0
	for i := 0; i < len(b) && i <= n; i += escapeLen(b, i) {
		safe = i
	}
	if len(b) <= n {
		return len(b)
	}
	return safe
}

// splitThink takes the thinking out of the head of a whole content.
func splitThink(content []byte) (reasoning, text []byte) {
	lead := bytes.TrimLeft(content, " \t\r\n")
	if !bytes.HasPrefix(lead, []byte(thinkOpen[0])) {
		return nil, content
	}
	lead = lead[len(thinkOpen[0]):]
	i := bytes.Index(lead, []byte(thinkClose[0]))
	if i < 0 {
		return lead, nil
	}
	return lead[:i], bytes.TrimLeft(lead[i+len(thinkClose[0]):], " \t\r\n")
}
