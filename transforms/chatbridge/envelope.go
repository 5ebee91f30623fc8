package chatbridge

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// The reasoning envelope is what the bridge writes in a reasoning item's
// encrypted_content. Clients keep different parts of a reasoning item for
// the next turn: Codex all of it, the Vercel AI SDK only summary and
// encrypted_content, others only encrypted_content. So the envelope
// carries the text itself, and the next turn sends the upstream its own
// reasoning back whatever the client kept:
//
//	llmt2.<base64url(deflate({"p":<profile>,"t":<text>}))>
//
// It is versioned, holds no secret (it is the client's own conversation),
// and is bounded: an item cut at max_reasoning keeps no text and says so
// (llmt1 with "cut":true), and decoding stops past the cap.
const envelopePrefix = "llmt2."

// flateWriters recycles compressors: each holds about a megabyte of
// tables, which a stream would otherwise allocate per reasoning item.
var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed)
	return w
}}

// textEnvelope seals the reasoning text, given as the JSON string content
// it streamed as (escaped, without quotes), for profile.
func textEnvelope(profile string, esc *rope) string {
	var buf bytes.Buffer
	b64 := base64.NewEncoder(base64.RawURLEncoding, &buf)
	buf.WriteString(envelopePrefix)
	fw := flateWriters.Get().(*flate.Writer)
	fw.Reset(b64)
	_, _ = io.WriteString(fw, `{"p":`+strconv.Quote(profile)+`,"t":"`)
	for _, blk := range esc.blocks {
		_, _ = fw.Write(blk)
	}
	_, _ = io.WriteString(fw, `"}`)
	_ = fw.Close()
	flateWriters.Put(fw)
	_ = b64.Close()
	return buf.String()
}

// textEnvelopeOf is textEnvelope for decoded text.
func textEnvelopeOf(profile string, text []byte) string {
	esc := jsonspan.AppendString(nil, text)
	r := rope{blocks: [][]byte{esc[1 : len(esc)-1]}}
	return textEnvelope(profile, &r)
}

// openEnvelope returns the profile and text of an llmt2 envelope; ok is
// false for anything else, and for an envelope whose contents run past
// limit bytes.
func openEnvelope(env string, limit int) (profile, text string, ok bool) {
	raw, found := strings.CutPrefix(env, envelopePrefix)
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
