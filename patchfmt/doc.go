// Package patchfmt repairs and validates the text of Codex's apply_patch
// tool.
//
// When the gateway turns the custom apply_patch tool into a function tool,
// the model no longer writes under Codex's grammar and often gets the
// envelope slightly wrong: decorated markers, Add File lines without their
// "+", stray "*** End of File" lines, hunks that delete and re-add the same
// lines. Normalize repairs those mistakes, Normalizer does the same for text
// that arrives in pieces, and Parse checks the result against the grammar
// Codex declares, so that the gateway can log or reject a patch it could
// not repair.
//
// # Normalisation
//
// Normalize and Normalizer run the same line machine, so a streamed patch
// and the same text normalised at once cannot disagree. White space means
// ASCII white space throughout: a piece boundary can split a multi-byte
// space, and trimming one would change file content.
//
//   - If the text, trimmed, starts with "<invoke", the part after the first
//     ">" up to the last "</invoke>" (or to the end if there is none),
//     trimmed, replaces it. That only happens when the inner text is a
//     patch and does not itself start with "<invoke"; otherwise the whole
//     text is left alone apart from line endings, since unwrapping it would
//     let a second normalisation change it again.
//   - Lines are split at "\n", every "\r" ending a line is dropped, each
//     output line ends in "\n", and blank lines at the end of the input or
//     the output are dropped: a non-empty result ends in exactly one "\n",
//     and empty input stays empty.
//   - The rules below apply from a line starting "*** Begin Patch" (after
//     trimming) to the next "*** End Patch" line. Other lines, and text that
//     is not a patch at all, are copied unchanged apart from line endings.
//   - With t the line trimmed: "*** End of File" and "*** End of File ***"
//     (any case) are dropped; a t starting "*** Begin Patch" or
//     "*** End Patch" becomes exactly that marker; any other t starting
//     "***" or "@@" is written as t and ends Add mode, which a t starting
//     "*** Add File" begins. In Add mode a line is prefixed with "+" unless,
//     left-trimmed, it starts with "+", "-", "\" or "@@"; a blank line
//     becomes "+".
//   - Unlike Monoize, a dropped "*** End of File" does not end Add mode:
//     once the marker is gone a second pass would prefix the lines after
//     it, and normalising twice would differ from normalising once.
//   - Inside an Update section a line starting with a space is a context
//     line and no marker rule applies to it, as in Codex's parser, so file
//     content such as " ***" (a Markdown rule) or " @@" survives.
//   - Header lines are trimmed like any marker, so a path made only of
//     white space becomes empty and Parse rejects the result.
//
// # No-op hunks
//
// An Update section is its "*** Update File" line, an optional
// "*** Move to" line after it, and the lines up to the next "***" line, a
// following "*** Update File" included: consecutive sections stay apart.
// The body is split into hunks at "@@" lines; lines before the first "@@"
// form a hunk without one.
//
// Blank lines and lines starting with "\" are not context. They never keep
// a hunk, never make its sides differ, and go with it when it is dropped;
// they do not separate the Move to line from its header either. A line
// starting with a space, or any other text, is context and keeps its hunk.
//
// A hunk is dropped when it has at least one "-" or "+" line, its "-"
// bodies in order equal its "+" bodies in order, and every other line but
// its "@@" line is blank or starts with "\". A hunk without an "@@" line
// that holds only blank and "\" lines is dropped as empty. A hunk of "@@"
// lines alone is kept: Codex uses them to narrow the context. A section
// left with no hunk loses its header, unless it has a Move to line, which
// keeps both headers so that the rename survives. A patch made only of
// no-op updates thus normalises to bare markers, which Parse rejects, as
// Codex would.
//
// # Streaming
//
// Normalizer releases each line once no later input can change it, and
// holds only: the partial last line; blank lines, until a line that is not
// blank follows; an Update header, until its section keeps a hunk or has a
// Move to; the lines of a hunk that can still turn out to be a no-op; and,
// behind an "<invoke" wrapper, the text until its first "*** Begin Patch"
// line shows it to be a patch, white space that may prove to be trailing,
// and everything from the first "</invoke>" on, since the last one wins.
//
// # Parsing
//
// Parse accepts exactly the language of the Lark grammar that Codex 0.169
// sends with the tool: "\n" line ends only, no white space around markers,
// at least one hunk, and an optional line feed after "*** End Patch". It
// also accepts one "*** Environment ID: " line right after
// "*** Begin Patch", which Codex's multi-environment grammar adds. An error
// is a *ParseError naming the line and what was expected there. Validate
// runs the same parser without building the Patch, for a caller that only
// needs Parse's verdict, and returns the same error.
// (*Patch).String writes the canonical text: for every accepted input it
// is that input byte for byte, with a missing final line feed added.
package patchfmt
