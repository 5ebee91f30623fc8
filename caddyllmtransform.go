// Package caddyllmtransform is the import path xcaddy builds with
// (`xcaddy build --with github.com/llmtransform/caddy-llm-transform`); it
// registers the llm_transform handler and every transform.
package caddyllmtransform

import (
	// Registers http.handlers.llm_transform and its Caddyfile directive.
	_ "github.com/llmtransform/caddy-llm-transform/caddymodule"
	// Registers the transforms (llm_transform.transforms.*).
	_ "github.com/llmtransform/caddy-llm-transform/transforms/all"
)
