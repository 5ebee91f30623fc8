// Package transforms is the rule engine of caddy-llm-transform: the rules,
// the per-request exchange that runs them, and the tool layer that rules
// rewriting tools build on. caddymodule supplies the HTTP plumbing.
//
// # One request through the pipeline
//
// Loading a config, Compile turns each rule object
// {"transform","enabled","phase","models","config"} into a Rule: it loads
// the Caddy module llm_transform.transforms.<transform> with the rule's
// config (strict JSON, Provision, Validate), checks the phase and scope the
// module allows, and keeps the result, immutable, for every request of the
// config. A Chain is the provider rules, then the global ones, then those of
// the caller's API key.
//
// For one request the handler:
//
//  1. reads the body and makes an Exchange in the client's protocol;
//  2. Chain.Begin binds the rules whose model globs match and works out
//     the protocol on each side of every rule: a ProtocolBridge changes it
//     for every rule after it, and the last rule's far side is the
//     upstream's;
//  3. Exchange.RewriteRequest runs the request phases in chain order, each
//     on the body the one before produced, telling each rule its protocol
//     (Exchange.Protocol). A bridge may also move the upstream path. An
//     *Error from any rule rejects the request before a byte goes out.
//     The handler calls Exchange.RewriteRequestBody: a large body the last
//     rule rewrites with edits of known lengths is then not built, but
//     written as the upstream reads it (RequestBody);
//  4. the response comes back through the same rules in reverse, an onion:
//     each rule undoes its own work after every rule nearer the upstream
//     has undone theirs. A JSON body goes through Exchange.RewriteResponse;
//     an SSE body through a Stream, which parses the upstream's framing,
//     reads each Responses event's head once, hands every event to the
//     stages from the upstream side back (past a stage that declares it
//     does not handle the event's type), and writes what comes out in the
//     client's framing (named events and a
//     gap-free sequence_number for Responses, data lines and [DONE] for
//     Chat). Events no stage touches keep their bytes (an event no stage
//     handles, already numbered as the client expects, is written straight
//     from its head, the common text delta); an abort becomes an
//     error event in the client's shape. Runs of like events skip the
//     general way: the parser offers each event to the Stream first
//     (streambuf.Parser.Claim), which takes one laid out exactly as the
//     event that started its run (a text delta after a text delta no
//     stage handled, an argument delta of the call the first stage's
//     last delta went to) and writes it, renumbered if need be, or hands
//     its data to that stage (runTaker), with the reading, the head and
//     the dispatch done once for the run. The upstream's error statuses
//     pass through untouched, except that a rule implementing
//     ErrorRewriter (a bridge) may put a JSON error body in its client's
//     terms, keeping the status;
//  5. last, if a rule changed the tools or tool_choice the client sent, the
//     engine puts the client's own values back where Responses objects
//     echo them.
//
// Everything a request learns lives in its Exchange and dies with it;
// nothing is kept between requests.
//
// # The tool layer
//
// Rules that touch tools share three parts instead of each walking bodies
// and streams on its own:
//
//   - WalkTools validates a request body and lists its tool nodes in one
//     pass: definitions (top level, in namespaces at any depth, in
//     additional_tools items, Chat's nested shapes), history calls and
//     outputs, tool_choice and its allowed_tools entries, each with type,
//     namespace, name, call id and span. A rule looks at all of them, plans
//     its edits (Replace, Rename, Edit, ReplaceWith…) and Rewrite builds
//     the body in one copy, or leaves it to be built as it is read.
//   - The Exchange's ToolMap links, per rule, the identity a rule was
//     handed to the one it passed on, so a rule restores only its own work
//     and any rule can follow the links back to what the client declared.
//   - The call tracker (NewCallStream, RestoreCalls) finds the upstream's
//     calls in JSON bodies and in both stream flavours and asks the rule's
//     CallPolicy which are its own. A call's life is opened (OpenCall),
//     argument deltas (CallHandler.Delta), then finished (Finish) or
//     abandoned; a built-in call (local_shell_call, …) is built whole
//     once its arguments are complete (ItemBuilder). The tracker writes
//     the client's shape, leaves sequence_number to the engine and never
//     completes a call from partial arguments.
//
// The transforms live in packages of their own and use only this
// package's exported API, as a transform from another module does
// (docs/writing-a-transform.md): customtools (field_custom_tools_to_function)
// and toolsplan (tools_plan) are call policies, and tools_plan runs the
// former's conversion inside its own request phase and stream
// (Exchange.RewriteNested), the one declared import between transforms.
// chatbridge (responses_to_chat) is a ProtocolBridge: rules before it see
// Responses, rules after it Chat. toolsfilter (tools_filter) and schema
// (tools_normalize_schema) use the tool walk alone: the filter decides by
// the identities the walk reads (and refuses a definition whose identity
// keys repeat, as the walk reads the first and upstreams the last), and
// the normalizer rewrites the parameters of the function nodes, whichever
// rule made them. The filter's response side is its own stage: it judges
// calls, it restores none. fieldset (field_set) edits one member.
// transforms/all registers them all; transforms/transformtest has the
// helpers their tests share.
//
// # Rounds
//
// A rule's response phase may take a round instead of passing the
// upstream's answer on (rounds.go): a RoundTaker asks with
// Exchange.StartRound for another upstream request, built from the body
// its request phase was handed (kept alive for the exchange) plus what it
// learned. The handler sends it through the request phases of the rules
// nearer the upstream (RoundRequest), and the answer comes back through
// their response phases (fresh stages, Stream.ResumeRound; or
// ResumeResponse for JSON) to the same stage, which carries on. A joiner
// stands on the client's side of the rule's stage and makes the rounds one
// answer for the rest of the chain: one lifecycle, the round's terminal
// event held until it is known whether another round answers, dense
// output_index, usage summed; for Chat one id, the role once, one finish
// and usage chunk. Rounds are capped per request (Limits.MaxRounds,
// MaxRoundTime); a failed round (Round.Err) ends the answer as if it had
// not helped. Request-phase state (records, the tool map) belongs to the
// Exchange and stays valid across rounds; a rule's request phase may run
// again (on the request of a round a rule nearer the client takes), so it
// records what it learns as a replacement, not an addition. Nothing
// outlives the request.
package transforms
