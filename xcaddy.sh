#!/usr/bin/env bash
# Builds Caddy with this module (./caddy) or runs it with Caddyfile.example.
#   ./xcaddy.sh build        build ./caddy
#   ./xcaddy.sh run [args]   build if needed, then run Caddyfile.example
set -euo pipefail
cd "$(dirname "$0")"

CADDY_VERSION="${CADDY_VERSION:-v2.11.9}"
XCADDY_VERSION="${XCADDY_VERSION:-v0.4.5}"
export PATH="$(go env GOPATH)/bin:$PATH"

if ! command -v xcaddy >/dev/null 2>&1; then
	echo "installing xcaddy $XCADDY_VERSION" >&2
	go install "github.com/caddyserver/xcaddy/cmd/xcaddy@$XCADDY_VERSION"
fi

build() {
	xcaddy build "$CADDY_VERSION" --output ./caddy \
		--with "github.com/llmtransform/caddy-llm-transform@v0.0.0=."
}

case "${1:-build}" in
build)
	build
	;;
run)
	shift || true
	[ -x ./caddy ] || build
	exec ./caddy run --config Caddyfile.example --adapter caddyfile "$@"
	;;
*)
	echo "usage: $0 build|run" >&2
	exit 2
	;;
esac
