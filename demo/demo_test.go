package demo

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
)

// TestDemoUpstreamServesConfiguredPatch checks the module's options reach
// the provider it wraps.
func TestDemoUpstreamServesConfiguredPatch(t *testing.T) {
	u := &Upstream{Patch: "*** Begin Patch\n*** End Patch"}
	if err := u.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/anything/v1/responses", strings.NewReader(
		`{"model":"m","input":"hi","tools":[{"type":"function","name":"apply_patch","parameters":{"type":"object"}}]}`))
	if err := u.ServeHTTP(rec, req, nil); err != nil {
		t.Fatal(err)
	}
	args := gjson.Get(rec.Body.String(), `output.#(type=="function_call").arguments`).String()
	if rec.Code != http.StatusOK || args != `{"input":"*** Begin Patch\n*** End Patch"}` {
		t.Errorf("status %d, arguments %q; body %s", rec.Code, args, rec.Body)
	}
}

func TestDemoUpstreamUnmarshalCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		name, input string
		wantPatch   string
		wantDelta   int
		wantErr     string
	}{
		{name: "empty", input: `llm_transform_demo_upstream`},
		{
			name:      "all options",
			input:     "llm_transform_demo_upstream {\n\tpatch `*** Begin Patch\n*** End Patch`\n\tdelta_size 3\n}",
			wantPatch: "*** Begin Patch\n*** End Patch",
			wantDelta: 3,
		},
		{name: "inline argument", input: `llm_transform_demo_upstream foo`, wantErr: "wrong argument count"},
		{name: "zero delta", input: "llm_transform_demo_upstream {\n\tdelta_size 0\n}", wantErr: `delta_size must be a positive integer, got "0"`},
		{name: "missing patch", input: "llm_transform_demo_upstream {\n\tpatch\n}", wantErr: "wrong argument count"},
		{name: "extra patch arg", input: "llm_transform_demo_upstream {\n\tpatch a b\n}", wantErr: "wrong argument count"},
		{name: "unknown", input: "llm_transform_demo_upstream {\n\tmodel x\n}", wantErr: `unrecognized subdirective "model"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d Upstream
			err := d.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Patch != tc.wantPatch || d.DeltaSize != tc.wantDelta {
				t.Errorf("got patch %q delta_size %d, want %q %d", d.Patch, d.DeltaSize, tc.wantPatch, tc.wantDelta)
			}
		})
	}
}

func TestDemoUpstreamValidate(t *testing.T) {
	if err := (&Upstream{DeltaSize: -1}).Validate(); err == nil {
		t.Error("negative delta_size accepted")
	}
	if err := (&Upstream{}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestDemoUpstreamCaddyfileAdapt checks the directive needs no order line
// and sorts before respond, so a catch-all respond cannot shadow it.
func TestDemoUpstreamCaddyfileAdapt(t *testing.T) {
	const cf = `:8080 {
	respond "fallback"
	llm_transform_demo_upstream /v1/* {
		delta_size 3
		patch <<EOF
			*** Begin Patch
			*** End Patch
			EOF
	}
}
`
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Errorf("warnings: %v", warnings)
	}
	var handlers []string
	for _, h := range gjson.GetBytes(out, "apps.http.servers.srv0.routes.#.handle.0").Array() {
		handlers = append(handlers, h.Raw)
	}
	want := []string{
		`{"delta_size":3,"handler":"llm_transform_demo_upstream","patch":"*** Begin Patch\n*** End Patch"}`,
		`{"body":"fallback","handler":"static_response"}`,
	}
	if !reflect.DeepEqual(handlers, want) {
		t.Errorf("handlers:\n got %q\nwant %q\nconfig: %s", handlers, want, out)
	}
}
