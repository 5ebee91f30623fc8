package chatbridge

import (
	// Chained with the bridge in tests: field_set, and tools_plan in the
	// canonical pipeline.
	_ "github.com/llmtransform/caddy-llm-transform/transforms/fieldset"
	_ "github.com/llmtransform/caddy-llm-transform/transforms/toolsplan"
)
