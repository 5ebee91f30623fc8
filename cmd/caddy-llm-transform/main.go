// Command caddy-llm-transform is Caddy with the standard modules, the
// llm_transform module and the demo upstream. It exists for the quick start,
// which then needs no xcaddy:
//
//	go run ./cmd/caddy-llm-transform run --config Caddyfile.example --adapter caddyfile
//
// Production builds use xcaddy with the module root instead, which leaves
// the demo out.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// plug in Caddy modules here
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/llmtransform/caddy-llm-transform"
	_ "github.com/llmtransform/caddy-llm-transform/demo"
)

func main() {
	caddycmd.Main()
}
