package messagesbridge

import (
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// rqRules is a chain of messages_to_chat alone with config.
func rqRules(config string) string {
	if config == "" {
		config = "{}"
	}
	return `[{"transform":"messages_to_chat","config":` + config + `}]`
}

// rqRun runs a Messages request through rules' request phases, with
// decisions kept, as the handler does for POST /v1/messages.
func rqRun(t *testing.T, rules, body string) (string, *transforms.Exchange, error) {
	t.Helper()
	x := transformtest.Begin(t, transformtest.Chain(t, rules), transforms.ProtocolMessages, []byte(body))
	x.Explain = true
	x.SetUpstreamPath("/v1/messages")
	out, err := x.RewriteRequest([]byte(body))
	return string(out), x, err
}

// rqDirect runs the bridge's request phase alone, configured as m, on an
// exchange whose client asked for model, and returns its record.
func rqDirect(t *testing.T, m MessagesToChat, model, body string) (string, *bridgeRecord, error) {
	t.Helper()
	if err := m.Provision(transformtest.Context(t)); err != nil {
		t.Fatal(err)
	}
	x := transforms.NewExchange(transforms.ProtocolMessages, transforms.Limits{}, nil)
	x.Model = model
	x.SetUpstreamPath("/v1/messages")
	out, err := m.RewriteRequest(x, []byte(body))
	return string(out), m.record(x), err
}

// rqDecisions lists the exchange's decisions as "tool action".
func rqDecisions(x *transforms.Exchange) []string {
	var out []string
	for _, d := range x.Decisions() {
		out = append(out, d.Tool+" "+d.Action)
	}
	return out
}

// rqBody is a Messages request with the given messages and extra members.
func rqBody(extra string, msgs ...string) string {
	return `{"model":"deepseek-v4-pro","max_tokens":1000` + extra + `,"messages":[` + strings.Join(msgs, ",") + `]}`
}

// rqChat is the Chat request expected for rqBody: extra members after the
// messages.
func rqChat(extra string, msgs ...string) string {
	return `{"model":"deepseek-v4-pro","messages":[` + strings.Join(msgs, ",") + `]` + extra + `}`
}
