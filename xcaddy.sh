#!/usr/bin/env bash
# Builds the production Caddy with this module, or runs the quick start.
#   ./xcaddy.sh build        xcaddy build with the module root: ./caddy, no demo upstream
#   ./xcaddy.sh run [args]   go build ./cmd/caddy-llm-transform (Caddy + this module + the
#                            demo upstream) as ./caddy-demo, then run Caddyfile.example
set -euo pipefail
cd "$(dirname "$0")"

CADDY_VERSION="${CADDY_VERSION:-v2.11.9}"
XCADDY_VERSION="${XCADDY_VERSION:-v0.4.5}"
export PATH="$(go env GOPATH)/bin:$PATH"

build() {
	if ! command -v xcaddy >/dev/null 2>&1; then
		echo "installing xcaddy $XCADDY_VERSION" >&2
		go install "github.com/caddyserver/xcaddy/cmd/xcaddy@$XCADDY_VERSION"
	fi
	xcaddy build "$CADDY_VERSION" --output ./caddy \
		--with "github.com/llmtransform/caddy-llm-transform@v0.0.0=."
}

case "${1:-build}" in
build)
	build
	;;
run)
	shift || true
	# Always rebuilt: go build is incremental, and a stale binary would run
	# old code after a checkout.
	go build -o ./caddy-demo ./cmd/caddy-llm-transform
	exec ./caddy-demo run --config Caddyfile.example --adapter caddyfile "$@"
	;;
*)
	echo "usage: $0 build|run" >&2
	exit 2
	;;
esac
