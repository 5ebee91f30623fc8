package transformtest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// Upstream answers one request body, in the upstream's protocol: a status
// and a body (an SSE stream for a streaming request).
type Upstream func(req []byte) (status int, body string)

// RunJSON runs a request through the exchange's rules, the upstream and
// every round the rules ask for, as the gateway's handler does, and
// returns the client's body, the bodies the upstream got, in order, and
// the rules' error.
func RunJSON(t testing.TB, x *transforms.Exchange, req []byte, up Upstream) ([]byte, [][]byte, error) {
	t.Helper()
	body, err := x.RewriteRequest(req)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	sent := [][]byte{bytes.Clone(body)}
	status, resp := up(body)
	if status != 200 {
		t.Fatalf("the first request failed: %d %s", status, resp)
	}
	out, err := x.RewriteResponse([]byte(resp))
	for err == nil && x.PendingRound() != nil {
		rb, rerr := x.RoundRequest()
		if rerr == nil {
			sent = append(sent, bytes.Clone(rb))
			if status, resp = up(rb); status != 200 {
				rerr = fmt.Errorf("the round's upstream answered %d", status)
			}
		}
		x.EndRound(rerr)
		if rerr != nil {
			out, err = x.ResumeResponse(nil)
		} else {
			out, err = x.ResumeResponse([]byte(resp))
		}
	}
	return out, sent, err
}

// RunStream is RunJSON for a stream, fed to the rules n bytes at a time.
// It returns what the client receives.
func RunStream(t testing.TB, x *transforms.Exchange, req []byte, up Upstream, n int) (string, [][]byte) {
	t.Helper()
	body, err := x.RewriteRequest(req)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	sent := [][]byte{bytes.Clone(body)}
	status, resp := up(body)
	if status != 200 {
		t.Fatalf("the first request failed: %d %s", status, resp)
	}
	s := x.NewStream()
	if s == nil {
		return resp, sent
	}
	var out bytes.Buffer
	feed := func(b []byte) {
		for len(b) > 0 && !s.Stopped() {
			k := min(n, len(b))
			_ = s.Write(b[:k])
			out.Write(s.Output())
			b = b[k:]
		}
	}
	feed([]byte(resp))
	_ = s.Close()
	out.Write(s.Output())
	for s.RoundPending() {
		rb, rerr := x.RoundRequest()
		if rerr == nil {
			sent = append(sent, bytes.Clone(rb))
			if status, resp = up(rb); status != 200 {
				rerr = fmt.Errorf("the round's upstream answered %d", status)
			} else {
				s.ResumeRound()
				feed([]byte(resp))
			}
		}
		x.EndRound(rerr)
		_ = s.Close()
		out.Write(s.Output())
	}
	return out.String(), sent
}
