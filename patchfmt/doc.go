// Package patchfmt repairs and validates the text of Codex's apply_patch
// tool.
//
// When the gateway turns a custom apply_patch tool into a function tool, the
// model no longer writes under Codex's grammar and often gets the envelope
// slightly wrong: decorated markers, Add File lines without their "+",
// "*** End of File" in odd places, a hunk that deletes and re-adds the same
// lines. Normalize repairs those mistakes so that Codex accepts the patch,
// Normalizer does the same for text that arrives in pieces, and Parse checks
// the result against the grammar Codex declares, so the gateway can log or
// reject a patch it could not repair.
//
// # Normalisation
//
// Normalize and Normalizer share one line machine, so a streamed patch and
// the same patch normalised at once always agree. The rules:
//
//   - If the text, with ASCII white space trimmed, starts with "<invoke", the
//     part after the first ">" up to the last "</invoke>" (or the end, if
//     there is none), trimmed, is used instead. This only happens when that
//     inner text is itself a patch and does not start with "<invoke" again;
//     otherwise the text is left as it is, because unwrapping nested or
//     non-patch text would make a second normalisation change it again.
//   - Text is split at "\n" and every "\r" at the end of a line is dropped.
//     Each output line ends in "\n", blank lines at the end are dropped, so a
//     non-empty result ends in exactly one "\n" and an empty input stays
//     empty.
//   - Rules apply only from a line starting "*** Begin Patch" (after
//     trimming) to the next "*** End Patch" line. Other text, including text
//     that is not a patch at all, is copied unchanged apart from line endings.
//   - Inside a patch, with t the line trimmed of ASCII white space:
//     "*** End of File" and "*** End of File ***" (any case) are dropped;
//     a t starting "*** Begin Patch" or "*** End Patch" becomes exactly that
//     marker; other t starting "***" or "@@" are written as t and end Add
//     mode, which a t starting "*** Add File" starts. In Add mode a line
//     gets a "+" prefix unless, left-trimmed, it starts with "+", "-", "\"
//     or "@@"; a blank line becomes "+".
//   - A dropped "*** End of File" does not end Add mode, unlike Monoize:
//     once the marker is gone a second pass would prefix the lines after it,
//     so normalising twice would differ from normalising once.
//   - Inside an Update section a line starting with a space is a context
//     line and no marker rule touches it, so file content such as " ***" (a
//     Markdown rule) or " @@" survives.
//
// # No-op hunks
//
// An Update section is its "*** Update File" line, an optional "*** Move to"
// line directly after it, and the lines up to the next "***" line (any
// "***" line, including another "*** Update File": consecutive sections stay
// separate). Its body is split into hunks at "@@" lines; the lines before
// the first "@@" form a hunk too. A hunk is a no-op, and is dropped, when it
// has at least one "-" or "+" line, its "-" bodies in order equal its "+"
// bodies in order, and every other line apart from its "@@" line is blank
// or starts with "\". Blank and "\" lines are thus not context: they neither
// keep a hunk alive nor make one differ, and go with the hunk when it is
// dropped. A line starting with a space, or any other text, is context and
// keeps the hunk. A section left with no hunk loses its header, unless it
// has a "*** Move to" line, which keeps both headers so the rename survives.
// A patch made only of no-op updates therefore normalises to bare markers,
// which Parse rejects, as Codex would.
//
// # Streaming
//
// Normalizer releases a line as soon as no later input can change it. It
// holds the current partial line; blank lines until a non-blank line
// follows; an Update header until its section keeps a hunk or gains a Move
// to; the lines of a hunk while it can still turn out to be a no-op; and,
// inside an "<invoke" wrapper, everything until the wrapped text is known
// to be a patch, white space that may turn out to be trailing, and
// everything from the first "</invoke>" on, since the last one wins.
//
// # Parsing
//
// Parse accepts exactly the Lark grammar Codex 0.169 sends with the tool:
// "\n" line ends only, no surrounding white space, at least one hunk, the
// final line feed after "*** End Patch" optional. It also accepts one
// "*** Environment ID: " line directly after "*** Begin Patch", which
// Codex's multi-environment grammar allows. (*Patch).String writes the
// canonical text back, and for every accepted input it reproduces the input
// byte for byte, apart from adding a missing final line feed.
package patchfmt
