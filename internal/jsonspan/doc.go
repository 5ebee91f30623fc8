// Package jsonspan is the module's one set of byte-level JSON helpers.
//
// The transforms rewrite requests and responses that are mostly left
// alone: a multi-megabyte request may need one member renamed deep inside
// its history. Decoding it into values and encoding it again would cost
// far more than the change, and would not even give back the client's bytes
// (key order, number spelling, escapes). So these helpers work on spans of
// the original document instead: the scanner validates while it walks and
// yields byte ranges, large values (message text, encrypted reasoning) are
// skipped without being decoded, and a rewrite is a list of Edits that
// copies every untouched byte verbatim. Decoding and encoding happen only
// for the few small strings a rule actually reads or writes.
//
// The streaming argument decoder in streambuf shares the escape decoder and
// the string encoder with the scanner, so that a string reads the same
// whether it arrives whole or in fragments.
package jsonspan
