package chatbridge

import (
	"github.com/llmtransform/caddy-llm-transform/internal/reasonenv"
)

// The reasoning envelope (internal/reasonenv) is what the bridge writes in
// a reasoning item's encrypted_content. An item cut at max_reasoning keeps
// no text and says so (llmt1 with "cut":true).
const envelopePrefix = reasonenv.Prefix

// textEnvelope seals the reasoning text, given as the JSON string content
// it streamed as (escaped, without quotes), for profile.
func textEnvelope(profile string, esc *rope) string { return reasonenv.Seal(profile, esc.blocks) }

// textEnvelopeOf is textEnvelope for decoded text.
func textEnvelopeOf(profile string, text []byte) string { return reasonenv.SealText(profile, text) }

// openEnvelope returns the profile and text of an llmt2 envelope; ok is
// false for anything else, and for an envelope whose contents run past
// limit bytes.
func openEnvelope(env string, limit int) (profile, text string, ok bool) {
	return reasonenv.Open(env, limit)
}
