package preflight

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestCaddyfileOptions(t *testing.T) {
	var p Preflight
	d := caddyfile.NewTestDispenser("tools_preflight {\n max_repairs 2\n on_failure drop\n dedup false\n}")
	if err := p.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(p)
	if string(got) != `{"max_repairs":2,"on_failure":"drop","dedup":false}` {
		t.Fatalf("config %s", got)
	}
	for _, bad := range []string{"max_repairs x", "max_repairs", "on_failure", "dedup maybe", "colour blue"} {
		var q Preflight
		if err := q.UnmarshalCaddyfile(caddyfile.NewTestDispenser("tools_preflight {\n " + bad + "\n}")); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestValidateAndDefaults(t *testing.T) {
	var p Preflight
	if err := p.Provision(caddy.Context{}); err != nil || p.maxRepairs != 1 || !p.dedup || p.onFailure != failPass {
		t.Fatalf("defaults: %+v %v", p, err)
	}
	six := 6
	for _, c := range []struct {
		p    Preflight
		want string
	}{
		{Preflight{MaxRepairs: &six}, "max_repairs must be between 0 and 5"},
		{Preflight{OnFailure: "retry"}, `on_failure: "retry"`},
	} {
		if err := c.p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.want)
		}
	}
}
