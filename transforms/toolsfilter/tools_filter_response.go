package toolsfilter

import (
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// The response side of tools_filter judges the upstream's calls on the
// call tracker (transforms.CallJudge). A call to a tool the request never
// offered (a model inventing one, or one a rule filtered) would reach a
// client that cannot run it: each is counted and logged, and with
// drop_undeclared_calls removed, in JSON and in streams.

// WantsResponse implements ResponseRewriter.
func (t *ToolsFilter) WantsResponse(x *transforms.Exchange) bool { return t.record(x).active }

// judgeCall says whether the upstream may call the tool: "" when it was
// offered, else "undeclared" or the reason it was filtered.
func (rec *filterRecord) judgeCall(id transforms.ToolID) string {
	if rec.declared[nameKey(id)] {
		return ""
	}
	if r, ok := rec.filtered[nameKey(id)]; ok {
		return r
	}
	if id.Name == "" {
		// A built-in call answers its tool type, and also a custom tool
		// of that name (Codex's apply_patch).
		alt := nameKey(transforms.ToolID{Type: "custom", Name: id.Type})
		if rec.declared[alt] || (id.Type == "computer" && rec.declared[nameKey(transforms.ToolID{Type: "computer_use_preview"})]) {
			return ""
		}
		if r, ok := rec.filtered[alt]; ok {
			return r
		}
	}
	return "undeclared"
}

// callPolicy is tools_filter's response side on the call tracker: it
// judges every call and restores none (transforms.JudgeOnly).
type callPolicy struct {
	t   *ToolsFilter
	rec *filterRecord
}

// JudgeCall implements CallJudge: a call to a tool the request did not
// offer is counted, and dropped with drop_undeclared_calls.
func (p callPolicy) JudgeCall(x *transforms.Exchange, c transforms.JudgedCall) transforms.CallVerdict {
	r := p.rec.judgeCall(c.Tool)
	if r == "" {
		return transforms.CallKeep
	}
	drop := p.t.DropUndeclaredCalls && !c.Late
	x.CountUnexpectedCall(c.Tool, c.Key, r, drop)
	if drop {
		return transforms.CallDrop
	}
	return transforms.CallKeep
}

// RewriteResponse implements ResponseRewriter.
func (t *ToolsFilter) RewriteResponse(x *transforms.Exchange, body []byte) ([]byte, error) {
	rec := t.record(x)
	if !rec.active {
		return body, nil
	}
	return transforms.RestoreCalls(x, transforms.JudgeOnly{CallJudge: callPolicy{t, rec}}, body), nil
}

// NewStream implements ResponseRewriter.
func (t *ToolsFilter) NewStream(x *transforms.Exchange) transforms.StreamTransform {
	rec := t.record(x)
	if !rec.active {
		return nil
	}
	return transforms.NewCallStream(x, transforms.JudgeOnly{CallJudge: callPolicy{t, rec}})
}
