package schema

import (
	// Chained after tools_plan in tests.
	_ "github.com/llmtransform/caddy-llm-transform/transforms/toolsplan"
)
