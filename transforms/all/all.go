// Package all registers every transform of this module with Caddy, as
// Caddy's modules/standard does for its own modules. The module root
// imports it; import it yourself only to build with a subset of the
// module's packages.
package all

import (
	// The transforms, each a Caddy module in llm_transform.transforms.
	_ "github.com/llmtransform/caddy-llm-transform/transforms/chatbridge"
	_ "github.com/llmtransform/caddy-llm-transform/transforms/customtools"
	_ "github.com/llmtransform/caddy-llm-transform/transforms/fieldset"
	_ "github.com/llmtransform/caddy-llm-transform/transforms/messagesbridge"
	_ "github.com/llmtransform/caddy-llm-transform/transforms/preflight"
	_ "github.com/llmtransform/caddy-llm-transform/transforms/schema"
	_ "github.com/llmtransform/caddy-llm-transform/transforms/tooldefer"
	_ "github.com/llmtransform/caddy-llm-transform/transforms/toolsfilter"
	_ "github.com/llmtransform/caddy-llm-transform/transforms/toolsplan"
)
