package caddymodule

import (
	// The handler's tests load the module's transforms by name, as a
	// build from the module root has them.
	_ "github.com/llmtransform/caddy-llm-transform/transforms/all"
)
