// Package reasonenv is the reasoning envelope the protocol bridges give a
// client in place of the reasoning the upstream gave them: in a Responses
// reasoning item's encrypted_content (responses_to_chat) or a Messages
// thinking block's signature (messages_to_chat). Clients keep different
// parts of a reasoning item for the next turn, and Claude Code may clear a
// thinking block's text but keeps its signature; so the envelope carries
// the text itself, and the next turn sends the upstream its own reasoning
// back whatever the client kept, without state:
//
//	llmt2.<base64url(deflate({"p":<profile>,"t":<text>}))>
//
// It is versioned, holds no secret (it is the client's own conversation),
// and is bounded: decoding stops past a cap.
package reasonenv

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Prefix starts every envelope of this version.
const Prefix = "llmt2."

// flateWriters recycles compressors: each holds about a megabyte of
// tables, which a stream would otherwise allocate per reasoning item.
var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed)
	return w
}}

// Seal seals the reasoning text of profile, given as the JSON string
// content it streamed as (escaped, without quotes), in blocks.
func Seal(profile string, escaped [][]byte) string {
	var buf bytes.Buffer
	b64 := base64.NewEncoder(base64.RawURLEncoding, &buf)
	buf.WriteString(Prefix)
	fw := flateWriters.Get().(*flate.Writer)
	fw.Reset(b64)
	_, _ = io.WriteString(fw, `{"p":`+strconv.Quote(profile)+`,"t":"`)
	for _, blk := range escaped {
		_, _ = fw.Write(blk)
	}
	_, _ = io.WriteString(fw, `"}`)
	_ = fw.Close()
	flateWriters.Put(fw)
	_ = b64.Close()
	return buf.String()
}

// SealText is Seal for decoded text.
func SealText(profile string, text []byte) string {
	esc := jsonspan.AppendString(nil, text)
	return Seal(profile, [][]byte{esc[1 : len(esc)-1]})
}

// Open returns the profile and text of an envelope; ok is false for
// anything else, and for an envelope whose contents run past limit bytes.
func Open(env string, limit int) (profile, text string, ok bool) {
	raw, found := strings.CutPrefix(env, Prefix)
	if !found {
		return "", "", false
	}
	zr := flate.NewReader(base64.NewDecoder(base64.RawURLEncoding, strings.NewReader(raw)))
	defer zr.Close()
	doc, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil || len(doc) > limit || !jsonspan.Valid(doc) {
		return "", "", false
	}
	var f [2]jsonspan.Span
	jsonspan.ObjectFields(doc, 0, []string{"p", "t"}, f[:])
	profile, _ = jsonspan.StringValue(doc, f[0])
	text, ok = jsonspan.StringValue(doc, f[1])
	return profile, text, ok
}

// Cut is the mark of reasoning a bridge cut at its cap, for profile:
// "llmt1." and base64url of {"p":<profile>,"cut":true}. It holds no text,
// so Open refuses it: no later turn sends part of the reasoning upstream
// as if it were the whole.
func Cut(profile string) string {
	return "llmt1." + base64.RawURLEncoding.EncodeToString([]byte(`{"p":`+strconv.Quote(profile)+`,"cut":true}`))
}

// DefaultMax is the bridges' default max_reasoning: about four times the
// longest reasoning of a 128k-token answer written as \u escapes, far
// above a real answer, small enough for many streams at once.
const DefaultMax = 4 << 20

// Max is a bridge's max_reasoning option in effect: the default for 0.
func Max(option int64) (int, error) {
	switch {
	case option < 0:
		return 0, fmt.Errorf("max_reasoning %d is negative", option)
	case option == 0:
		return DefaultMax, nil
	}
	return int(option), nil
}
