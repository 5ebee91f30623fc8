package caddymodule

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

func init() {
	caddy.RegisterModule(App{})
}

// App holds the rules every llm_transform handler shares: global rules, and
// rules bound to callers' API keys. It does nothing on its own; each handler
// reads it when it is provisioned and runs its own rules, then the global
// ones, then those of the caller's key.
//
// It also lists its config's handlers for the admin endpoint. Every config
// load provisions an App of its own, so the listing follows reloads; in a
// config with handlers but no llm_transform app, the first handler has one
// created, without rules.
type App struct {
	// Rules that run on every request of every llm_transform handler,
	// after the handler's own rules (and before them on the way back).
	Rules []transforms.RuleConfig `json:"rules,omitempty"`

	// Rules bound to callers. A request whose key matches runs them after
	// the global rules; other requests do not.
	APIKeys []APIKeyRules `json:"api_keys,omitempty"`

	// Where a caller's key is read: "authorization"
	// takes the token of an `Authorization: Bearer` header; any other
	// entry names a header whose whole value is the key. When several are
	// present they must agree, and none may repeat: a request whose
	// credentials are ambiguous is refused with 401. Default:
	// ["authorization", "x-api-key"].
	KeySources []string `json:"key_sources,omitempty"`

	global []*transforms.Rule
	keys   []apiKey
	// A pointer, since App values are copied (CaddyModule) and the
	// registry holds a mutex.
	handlers *handlerRegistry
}

// APIKeyRules is the rules of one caller key. The key itself is never
// stored: only its SHA-256.
type APIKeyRules struct {
	// The lowercase hex SHA-256 of the key, e.g. the output of
	// `printf %s "$KEY" | sha256sum`. The Caddyfile computes it from the key.
	// The hash is unsalted and the config is readable through the admin
	// endpoint, so it keeps only a high-entropy key secret: use a random
	// key of 32 characters or more, which the Caddyfile requires.
	KeySHA256 string `json:"key_sha256"`

	// The rules of requests that carry this key, in request order.
	Rules []transforms.RuleConfig `json:"rules,omitempty"`
}

type apiKey struct {
	sum      [sha256.Size]byte
	label    string // "api_key " + hash prefix: how the key shows in messages
	compiled []*transforms.Rule
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "llm_transform",
		New: func() caddy.Module { return new(App) },
	}
}

// hashPrefixLen is how much of a key's hash identifies it to operators:
// enough to tell keys apart, far too little to test guesses offline.
const hashPrefixLen = 12

// Provision decodes the key hashes and compiles every rule once, for all
// handlers, so a transform used in a scope it does not support fails the
// config load even when no handler uses the app yet.
func (a *App) Provision(ctx caddy.Context) error {
	a.handlers = new(handlerRegistry)
	var err error
	if a.global, err = transforms.Compile(ctx, a.Rules, transforms.ScopeGlobal, "global"); err != nil {
		return err
	}
	seen := map[[sha256.Size]byte]bool{}
	for i, k := range a.APIKeys {
		h := strings.ToLower(k.KeySHA256)
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != sha256.Size {
			return fmt.Errorf("api_keys[%d]: key_sha256 must be 64 hex digits", i)
		}
		key := apiKey{label: "api_key " + h[:hashPrefixLen]}
		copy(key.sum[:], b)
		if seen[key.sum] {
			return fmt.Errorf("%s: the same key is configured twice", key.label)
		}
		seen[key.sum] = true
		if key.compiled, err = transforms.Compile(ctx, k.Rules, transforms.ScopeAPIKey, key.label); err != nil {
			return err
		}
		a.keys = append(a.keys, key)
	}
	if len(a.KeySources) == 0 {
		a.KeySources = []string{"authorization", "x-api-key"}
	}
	for i, s := range a.KeySources {
		if s == "" {
			return fmt.Errorf("key_sources[%d]: empty header name", i)
		}
		a.KeySources[i] = http.CanonicalHeaderKey(s)
	}
	return nil
}

// Start is a no-op: the app only holds configuration.
func (a *App) Start() error { return nil }

// Stop is a no-op.
func (a *App) Stop() error { return nil }

// callerKey returns the caller's key from the configured sources, "" when
// they carry none. ok is false when the credentials are ambiguous: a source
// repeated, or two sources that disagree, counting a non-Bearer
// Authorization as a credential too. Resolving those to some key, or to
// none, would let a caller pick which of its credentials the rules see,
// and so shed its own key's rules.
func callerKey(r *http.Request, sources []string) (key string, ok bool) {
	found, foreign := false, false
	for _, s := range sources {
		vs := r.Header.Values(s)
		if len(vs) == 0 {
			continue
		}
		if len(vs) > 1 {
			return "", false
		}
		v, other := strings.TrimSpace(vs[0]), false
		if s == "Authorization" {
			scheme, token, isBearer := strings.Cut(v, " ")
			if isBearer && strings.EqualFold(scheme, "Bearer") {
				v = strings.TrimSpace(token)
			} else {
				other = true
			}
		}
		switch {
		case !found:
			key, foreign, found = v, other, true
		case v != key || other || foreign:
			return "", false
		}
	}
	if foreign {
		return "", true // another scheme's credential, no key
	}
	return key, true
}

// matchKey returns the index of the key whose hash equals sum, or -1. Every
// stored hash is compared, in constant time, whatever matched before, so the
// time taken says nothing about which key (if any) matched.
func matchKey(keys []keyChain, sum *[sha256.Size]byte) int {
	match := -1
	for i := range keys {
		eq := subtle.ConstantTimeCompare(keys[i].sum[:], sum[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	return match
}

// HashAPIKey returns the key_sha256 form of a key.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Interface guards
var (
	_ caddy.App         = (*App)(nil)
	_ caddy.Provisioner = (*App)(nil)
)
