package messagesbridge

import (
	"bytes"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Upstreams without a reasoning parser (self-hosted vLLM or SGLang, some
// MiniMax and GLM models) write the model's thinking at the head of the
// content, between <think> and </think>. Content that opens with the tag
// (after white space) has that part taken out as thinking; any other
// content is text as it came. On a stream the tags may be cut anywhere
// between chunks, so the splitter holds back only what could still be
// part of one, and works on decoded text: a tag may also come escaped
// (\u003cthink\u003e), and decoding makes both spellings one.

const (
	openTag  = "<think>"
	closeTag = "</think>"
)

// thinkSplit is the streamed content's state.
type thinkSplit struct {
	state byte // 0 undecided, 't' inside <think>, 'w' after </think>, 'm' text
	// held is decoded content not let out yet: white space and a partial
	// <think> while undecided, a partial </think> inside.
	held []byte
	// blank is how much of held is known to be white space.
	blank int
}

// content routes a content delta, escaped as the upstream wrote it.
func (s *chatToMessages) content(emit transforms.Emit, esc []byte) error {
	th := &s.think
	switch th.state {
	case 'm':
		return s.text(emit, esc)
	case 'w':
		// White space between </think> and the text is the tag's.
		if esc = trimEscapedSpace(esc); len(esc) == 0 {
			return nil
		}
		th.state = 'm'
		return s.text(emit, esc)
	}
	th.held = jsonspan.Unescape(th.held, esc)
	if th.state == 0 {
		for th.blank < len(th.held) && isSpace(th.held[th.blank]) {
			th.blank++
		}
		rest := th.held[th.blank:]
		switch {
		case len(rest) == 0:
			return nil // only white space so far: it may lead a <think>
		case bytes.HasPrefix(rest, []byte(openTag)):
			th.state = 't'
			th.held = append(th.held[:0], rest[len(openTag):]...)
		case len(rest) < len(openTag) && bytes.HasPrefix([]byte(openTag), rest):
			return nil // perhaps "<thi" of "<think>"
		default:
			th.state = 'm'
			out := th.held
			th.held = nil
			return s.textDecoded(emit, out)
		}
	}
	// Inside the thinking: up to the closing tag.
	if i := bytes.Index(th.held, []byte(closeTag)); i >= 0 {
		thinking, rest := th.held[:i], th.held[i+len(closeTag):]
		th.held = nil
		th.state = 'w'
		if len(thinking) > 0 {
			if err := s.reasoningDecoded(emit, thinking); err != nil {
				return err
			}
		}
		if rest = bytes.TrimLeft(rest, " \t\r\n"); len(rest) == 0 {
			return nil
		}
		th.state = 'm'
		return s.textDecoded(emit, rest)
	}
	keep := partialTail(th.held, closeTag)
	out := th.held[:len(th.held)-keep]
	if len(out) == 0 {
		return nil
	}
	err := s.reasoningDecoded(emit, out)
	th.held = append(th.held[:0], th.held[len(th.held)-keep:]...)
	return err
}

// flushThink lets out what the splitter holds when something else comes
// (a call, the end): an unclosed <think> is thinking; an undecided head is
// text, unless it is only white space, which leads nothing.
func (s *chatToMessages) flushThink(emit transforms.Emit) error {
	th := &s.think
	held := th.held
	th.held, th.blank = nil, 0
	if len(held) == 0 {
		return nil
	}
	switch th.state {
	case 't':
		return s.reasoningDecoded(emit, held)
	case 0:
		if isBlank(held) {
			return nil
		}
		th.state = 'm'
		return s.textDecoded(emit, held)
	}
	return nil
}

// partialTail is the length of the longest end of b that begins tag
// without holding all of it.
func partialTail(b []byte, tag string) int {
	for k := min(len(tag)-1, len(b)); k > 0; k-- {
		if bytes.HasPrefix([]byte(tag), b[len(b)-k:]) {
			return k
		}
	}
	return 0
}

// trimEscapedSpace drops the white space, plain or escaped, an escaped
// JSON string body begins with.
func trimEscapedSpace(b []byte) []byte {
	for len(b) > 0 {
		switch {
		case isSpace(b[0]):
			b = b[1:]
		case len(b) > 1 && b[0] == '\\' && (b[1] == 'n' || b[1] == 'r' || b[1] == 't'):
			b = b[2:]
		default:
			return b
		}
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// splitThink takes the thinking out of the head of a whole content, as the
// stream's splitter does piece by piece.
func splitThink(content []byte) (thinking, text []byte) {
	lead := bytes.TrimLeft(content, " \t\r\n")
	if !bytes.HasPrefix(lead, []byte(openTag)) {
		return nil, content
	}
	lead = lead[len(openTag):]
	i := bytes.Index(lead, []byte(closeTag))
	if i < 0 {
		return lead, nil
	}
	return lead[:i], bytes.TrimLeft(lead[i+len(closeTag):], " \t\r\n")
}
