package jsonspan

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// MaxDepth is the deepest nesting the scanner reads: deeper documents are
// not JSON it can read, whatever their grammar.
const MaxDepth = maxDepth

// Diagnose says why doc is not JSON the scanner reads, for an error
// message: the offset of the first byte at fault and what is wrong there
// (a grammar error as encoding/json words it, or nesting past MaxDepth).
// It returns -1 and "" for a document the scanner reads. It is for the
// failure path: it may take several passes.
func Diagnose(doc []byte) (offset int, reason string) {
	if Valid(doc) {
		return -1, ""
	}
	if at := DepthOver(doc, maxDepth); at >= 0 {
		return at, "nested deeper than " + strconv.Itoa(maxDepth) + " levels"
	}
	var se *json.SyntaxError
	if err := json.Unmarshal(doc, &struct{}{}); errors.As(err, &se) {
		if se.Error() == "unexpected end of JSON input" {
			return len(doc), se.Error()
		}
		return max(int(se.Offset)-1, 0), se.Error()
	} else if err != nil {
		return 0, err.Error()
	}
	// encoding/json reads what the scanner does not: nothing is known
	// to point at.
	return 0, "not JSON the gateway reads"
}

// DepthOver returns the offset of the first container of doc nested
// deeper than limit levels (the top-level value is level 1), or -1; it
// stops at an unterminated string.
func DepthOver(doc []byte, limit int) int {
	if bytes.Count(doc, []byte{'['})+bytes.Count(doc, []byte{'{'}) <= limit {
		return -1 // too few brackets to nest that deep, counted at memchr speed
	}
	depth := 0
	for i := 0; i < len(doc); i++ {
		switch doc[i] {
		case '"':
			e := skipStringFast(doc, i)
			if e < 0 {
				return -1
			}
			i = e - 1
		case '{', '[':
			if depth++; depth > limit {
				return i
			}
		case '}', ']':
			depth--
		}
	}
	return -1
}
