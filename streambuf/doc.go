// Package streambuf holds the low-level streaming pieces of the LLM
// transform: SSE framing (Parser, and Event, whose AppendTo writes an event
// back, from its original bytes or, once a rule has built it anew, from its
// fields) and per-call argument decoding (ArgsDecoder), which turns
// the JSON text of a function call's arguments, received in arbitrary
// fragments, into the decoded text of its "input" string as it arrives.
//
// Everything here is allocation-free in steady state: slices handed to
// callers alias the input or reusable internal buffers and are only valid
// for as long as each method documents. Callers that keep them must copy.
package streambuf
