package transforms_test

import (
	// The engine's own tests chain the module's transforms.
	_ "github.com/llmtransform/caddy-llm-transform/transforms/all"
)

// Requests the engine's tests send through the transforms, as the
// transforms' own tests write them.

// patchRequest declares Codex's custom apply_patch and a function.
const patchRequest = `{"model":"gpt-5.5","tools":[{"type":"custom","name":"apply_patch"},{"type":"function","name":"exec_command","parameters":{}}],"tool_choice":"auto","stream":true}`

// wildcard converts every custom tool.
const wildcard = `[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`

// planRules plans for a function-only upstream.
const planRules = `[{"transform":"tools_plan","config":{"profile":"function_only"}}]`

// planLongName is a 70-character dotted MCP function name; flattened under
// its namespace, sanitised and cut, it goes upstream as planLongUp.
const (
	planLongName = "repos.issues.comments.create_for_pull_request.with_review_thread.v2.01"
	planLongUp   = "mcp__github__repos_issues_comments_create_for_pull_reques_2c3qzt"
)

// planTools are the tools of the requests below, besides apply_patch.
const planTools = `{"type":"local_shell"},` +
	`{"type":"shell","environment":{"type":"local"}},` +
	`{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"linux"},` +
	`{"type":"tool_search","execution":"client","description":"Find tools","parameters":{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}},"required":["query"]}},` +
	`{"type":"namespace","name":"mcp__github","description":"GitHub","tools":[{"type":"function","name":"` + planLongName + `","parameters":{"type":"object","properties":{"body":{"type":"string"}}}}]},` +
	`{"type":"function","name":"exec_command","parameters":{}}`

// planBuiltinRequest declares the built-in apply_patch, planCustomRequest
// Codex's custom apply_patch. One request cannot declare both: they would
// share the upstream name apply_patch, and the plan answers 400.
const (
	planBuiltinRequest = `{"model":"gpt-5.5","stream":true,"tools":[{"type":"apply_patch"},` + planTools + `],"tool_choice":"auto"}`
	planCustomRequest  = `{"model":"gpt-5.5","stream":true,"tools":[{"type":"custom","name":"apply_patch","description":"Edit files.","format":{"type":"grammar","syntax":"lark","definition":"start: x"}},` + planTools + `],"tool_choice":"auto"}`
)
