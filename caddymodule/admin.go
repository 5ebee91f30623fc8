package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

func init() {
	caddy.RegisterModule(AdminRules{})
}

// AdminRules serves GET /llm_transform/rules on the admin endpoint: the
// effective rules of every llm_transform handler of the running config, by
// scope, with hit counts. Keys appear only as prefixes of their SHA-256.
type AdminRules struct{}

// CaddyModule returns the Caddy module information.
func (AdminRules) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.llm_transform",
		New: func() caddy.Module { return new(AdminRules) },
	}
}

// Routes returns the admin routes.
func (AdminRules) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/llm_transform/rules", Handler: caddy.AdminHandlerFunc(serveRules)}}
}

// handlerRegistry lists the handlers of one config for the admin endpoint.
// It lives in the config's App, so each config load starts an empty one and
// the old config's Cleanup touches only its own. The admin router cannot
// hold it: the admin server starts with the router before the config's apps
// are provisioned, and goes on serving when that config fails to load.
type handlerRegistry struct {
	mu   sync.Mutex
	list []*Handler
}

// add lists h, numbering it among the handlers of its server in
// provisioning (route) order.
func (reg *handlerRegistry) add(h *Handler) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for _, o := range reg.list {
		if o.server == h.server {
			h.index++
		}
	}
	reg.list = append(reg.list, h)
}

func (reg *handlerRegistry) remove(h *Handler) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for i, o := range reg.list {
		if o == h {
			reg.list = append(reg.list[:i], reg.list[i+1:]...)
			return
		}
	}
}

// sorted returns the listed handlers by server and position.
func (reg *handlerRegistry) sorted() []*Handler {
	reg.mu.Lock()
	out := append([]*Handler(nil), reg.list...)
	reg.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].server != out[j].server {
			return out[i].server < out[j].server
		}
		return out[i].index < out[j].index
	})
	return out
}

// activeHandlers returns the handlers of the running config, whose App is
// looked up per request since a reload swaps it; until the new config has
// started, the old one runs and is listed. AppIfConfigured finds the App
// whether the config configured it or a handler had it created, and
// creates none.
func activeHandlers() []*Handler {
	app, err := caddy.ActiveContext().AppIfConfigured("llm_transform")
	if err != nil {
		return nil // no config running, or one without llm_transform
	}
	return app.(*App).handlers.sorted()
}

// RulesReport is the body of GET /llm_transform/rules.
type RulesReport struct {
	Handlers []HandlerReport `json:"handlers"`
}

// HandlerReport is one handler's effective rules, in the order they run.
type HandlerReport struct {
	Server   string       `json:"server"`
	Index    int          `json:"index"`
	Explain  bool         `json:"explain"`
	Provider []RuleReport `json:"provider"`
	Global   []RuleReport `json:"global"`
	APIKeys  []KeyReport  `json:"api_keys"`
}

// KeyReport is the rules of one key, which shows as a hash prefix.
type KeyReport struct {
	KeySHA256Prefix string       `json:"key_sha256_prefix"`
	Rules           []RuleReport `json:"rules"`
}

// RuleReport describes one compiled rule.
type RuleReport struct {
	Name      string   `json:"name"`
	Transform string   `json:"transform"`
	Phase     string   `json:"phase"`
	Models    []string `json:"models"`
	Hits      uint64   `json:"hits"`
}

func serveRules(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method not allowed")}
	}
	rep := RulesReport{Handlers: []HandlerReport{}}
	for _, h := range activeHandlers() {
		hr := HandlerReport{Server: h.server, Index: h.index, Explain: h.Explain,
			Provider: ruleReports(h.provider), Global: ruleReports(h.global), APIKeys: []KeyReport{}}
		for _, k := range h.keys {
			hr.APIKeys = append(hr.APIKeys, KeyReport{KeySHA256Prefix: k.label[len("api_key "):], Rules: ruleReports(k.rules)})
		}
		rep.Handlers = append(rep.Handlers, hr)
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(rep)
}

func ruleReports(rules []*transforms.Rule) []RuleReport {
	out := make([]RuleReport, 0, len(rules))
	for _, r := range rules {
		models := r.Models()
		if models == nil {
			models = []string{}
		}
		out = append(out, RuleReport{Name: r.Name(), Transform: r.TransformID(), Phase: r.Phase().String(), Models: models, Hits: r.Hits()})
	}
	return out
}

// Interface guard
var _ caddy.AdminRouter = (*AdminRules)(nil)
