package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// adminConfig is a config with the given llm_transform app (none when
// empty) and servers, each a list of handlers, listening on sockets in dir.
// The admin endpoint is off: the test calls the route's handler itself, so
// it needs no port.
func adminConfig(dir, app string, servers map[string]string) string {
	cfg := `{"admin":{"disabled":true,"config":{"persist":false}},"apps":{`
	if app != "" {
		cfg += `"llm_transform":` + app + `,`
	}
	cfg += `"http":{"servers":{`
	first := true
	for name, handlers := range servers {
		if !first {
			cfg += `,`
		}
		first = false
		cfg += `"` + name + `":{"listen":["unix/` + dir + `/` + name + `.sock"],"automatic_https":{"disable":true},"routes":[{"handle":` + handlers + `}]}`
	}
	return cfg + `}}}}`
}

// listRules is GET /llm_transform/rules, through the route AdminRules gives
// the admin server.
func listRules(t *testing.T) string {
	t.Helper()
	routes := AdminRules{}.Routes()
	if len(routes) != 1 || routes[0].Pattern != "/llm_transform/rules" {
		t.Fatalf("routes %+v", routes)
	}
	rec := httptest.NewRecorder()
	if err := routes[0].Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/llm_transform/rules", nil)); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(rec.Body.String())
}

// TestAdminListingFollowsReloads loads configs in turn: the listing shows
// the running config's handlers only, numbered afresh, whether its
// llm_transform app is configured or created for its handlers; the old
// config's Cleanup, which runs after the new one started, leaves the new
// listing alone, and a config that fails to load changes nothing.
func TestAdminListingFollowsReloads(t *testing.T) {
	dir := t.TempDir()
	t.Cleanup(func() { _ = caddy.Stop() }) // before dir goes
	fieldSet := func(v string) string {
		return `{"transform":"field_set","config":{"path":"tier","value":"` + v + `"}}`
	}
	rule := func(name string) string {
		return `{"name":"` + name + ` (field_set)","transform":"field_set","phase":"request","models":[],"hits":0}`
	}

	a := adminConfig(dir, `{"rules":[`+fieldSet("global")+`]}`, map[string]string{
		"a": `[{"handler":"llm_transform","rules":[` + fieldSet("a0") + `]},{"handler":"llm_transform","explain":true}]`,
	})
	if err := caddy.Load([]byte(a), true); err != nil {
		t.Fatal(err)
	}
	global := `[` + rule("global rule 0") + `]`
	want := `{"handlers":[` +
		`{"server":"a","index":0,"explain":false,"provider":[` + rule("rule 0") + `],"global":` + global + `,"api_keys":[]},` +
		`{"server":"a","index":1,"explain":true,"provider":[],"global":` + global + `,"api_keys":[]}]}`
	if got := listRules(t); got != want {
		t.Fatalf("config A:\n got %s\nwant %s", got, want)
	}

	// No llm_transform app: the handlers' own is created, without rules.
	b := adminConfig(dir, "", map[string]string{
		"a": `[{"handler":"llm_transform","rules":[` + fieldSet("b0") + `]}]`,
		"b": `[{"handler":"llm_transform"}]`,
	})
	if err := caddy.Load([]byte(b), true); err != nil {
		t.Fatal(err)
	}
	want = `{"handlers":[` +
		`{"server":"a","index":0,"explain":false,"provider":[` + rule("rule 0") + `],"global":[],"api_keys":[]},` +
		`{"server":"b","index":0,"explain":false,"provider":[],"global":[],"api_keys":[]}]}`
	if got := listRules(t); got != want {
		t.Fatalf("config B:\n got %s\nwant %s", got, want)
	}

	// A config that fails lists nothing, not even the handlers it
	// provisioned before the one that failed: B goes on running.
	bad := adminConfig(dir, "", map[string]string{
		"a": `[{"handler":"llm_transform"},{"handler":"llm_transform","protocol":"bogus"}]`,
	})
	if err := caddy.Load([]byte(bad), true); err == nil {
		t.Fatal("a bogus protocol loaded")
	}
	if got := listRules(t); got != want {
		t.Fatalf("after a failed load:\n got %s\nwant %s", got, want)
	}

	c := adminConfig(dir, "", map[string]string{"c": `[{"handler":"static_response","body":"ok"}]`})
	if err := caddy.Load([]byte(c), true); err != nil {
		t.Fatal(err)
	}
	if got := listRules(t); got != `{"handlers":[]}` {
		t.Fatalf("config C: %s", got)
	}

	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := listRules(t); got != `{"handlers":[]}` {
		t.Fatalf("stopped: %s", got)
	}
}
