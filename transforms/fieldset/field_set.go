// Package fieldset is the field_set transform: it writes one member of
// the request body, at any depth (a model alias, a pinned parameter, a
// metadata tag), leaving every other byte as the client sent it.
package fieldset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

func init() {
	caddy.RegisterModule(FieldSet{})
}

// FieldSet writes one member of the request body: a model's default
// reasoning effort, a metadata tag for a team's key, a service tier.
// Operators use it per upstream, for everyone and per key alike. Missing
// objects on the path are created, and a value on the way that is not an
// object is replaced by one. Everything else in the body keeps its bytes,
// and a body that already holds the value is forwarded as it came.
type FieldSet struct {
	// The dot-separated path of the member to write, from the top level
	// down, such as "reasoning.effort". Required.
	Path string `json:"path,omitempty"`
	// The JSON value to write. Required.
	Value json.RawMessage `json:"value,omitempty"`

	path []string
	// keys[i] is path[i] as a JSON string literal, the form it is inserted
	// in. Keys of the body are compared after unescaping, as its parsers
	// read them: "te\u0061m" is the key team.
	keys [][]byte
	// members[i] is the member `"path[i]":<object holding the rest>`,
	// inserted when path[i] is missing; objects[i] is the object holding
	// path[i:], written over a non-object found at path[i-1].
	members [][]byte
	objects [][]byte
	value   []byte
}

// CaddyModule returns the Caddy module information.
func (FieldSet) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  transforms.ModuleID("field_set"),
		New: func() caddy.Module { return new(FieldSet) },
	}
}

// UnmarshalCaddyfile sets up the transform from its rule block. The value
// is JSON when it parses as JSON and a string otherwise, so `value high`
// means "high" and `value 3` means 3. Syntax:
//
//	rule field_set {
//		path  <member.path>
//		value <json-or-string>
//	}
func (t *FieldSet) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // transform name
	for d.NextBlock(0) {
		opt := d.Val()
		var arg string
		if !d.Args(&arg) || d.NextArg() {
			return d.ArgErr()
		}
		switch opt {
		case "path":
			if t.Path != "" {
				return d.Err("path already specified")
			}
			t.Path = arg
		case "value":
			if t.Value != nil {
				return d.Err("value already specified")
			}
			if json.Valid([]byte(arg)) {
				t.Value = json.RawMessage(arg)
			} else {
				t.Value, _ = json.Marshal(arg)
			}
		default:
			return d.Errf("unrecognized option %q", opt)
		}
	}
	return nil
}

// Provision precomputes the bytes the rewrite inserts.
func (t *FieldSet) Provision(caddy.Context) error {
	if t.Path == "" {
		return fmt.Errorf("path: required")
	}
	if len(t.Value) == 0 {
		return fmt.Errorf("value: required")
	}
	var v bytes.Buffer
	if err := json.Compact(&v, t.Value); err != nil {
		return fmt.Errorf("value: %v", err)
	}
	t.value = v.Bytes()
	t.path = strings.Split(t.Path, ".")
	n := len(t.path)
	t.keys = make([][]byte, n)
	t.members = make([][]byte, n)
	t.objects = make([][]byte, n+1)
	t.objects[n] = t.value
	for i := n - 1; i >= 0; i-- {
		if t.path[i] == "" {
			return fmt.Errorf("path %q: empty member name", t.Path)
		}
		t.keys[i] = jsonspan.AppendStringStr(nil, t.path[i])
		m := append(append(bytes.Clone(t.keys[i]), ':'), t.objects[i+1]...)
		t.members[i] = m
		t.objects[i] = append(append([]byte{'{'}, m...), '}')
	}
	return nil
}

// ReadsProtocol implements transforms.ProtocolReader: a field is a field in
// any protocol's JSON body, Anthropic's Messages included.
func (t *FieldSet) ReadsProtocol(transforms.Protocol) bool { return true }

// RewriteRequest implements transforms.RequestRewriter.
func (t *FieldSet) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	i := jsonspan.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		// Valid JSON that is not an object has no fields to set; anything
		// else is not JSON and goes upstream untouched.
		if !jsonspan.Valid(body) {
			return nil, transforms.ErrInvalidJSON
		}
		return body, nil
	}
	var edits []jsonspan.Edit
	end := t.set(body, i, 0, &edits)
	if end < 0 || jsonspan.SkipSpace(body, end) != len(body) {
		return nil, transforms.ErrInvalidJSON
	}
	if len(edits) == 0 {
		return body, nil
	}
	x.Decide(t.Path, "set_field", "field_set rule")
	return x.ApplyEdits(body, edits), nil
}

// set plans the edits that write path[depth:] into the object at
// doc[start], validating the object on the way, and returns the index just
// past it (-1 when malformed). Every member named path[depth] is written,
// so a body with a duplicated key cannot smuggle an old value past us.
func (t *FieldSet) set(doc []byte, start, depth int, edits *[]jsonspan.Edit) int {
	last := depth == len(t.path)-1
	key := t.path[depth]
	found := false
	tail := -1 // end of the last member's value: where a new member goes
	end := jsonspan.WalkMembers(doc, start, func(k jsonspan.Span, v int) int {
		var e int
		if !jsonspan.KeyIs(doc, k, key) {
			e = jsonspan.SkipValue(doc, v)
		} else {
			found = true
			switch {
			case last:
				if e = jsonspan.SkipValue(doc, v); e >= 0 && !bytes.Equal(doc[v:e], t.value) {
					*edits = append(*edits, jsonspan.Edit{Start: v, End: e, Repl: t.value})
				}
			case v < len(doc) && doc[v] == '{':
				e = t.set(doc, v, depth+1, edits)
			default:
				if e = jsonspan.SkipValue(doc, v); e >= 0 {
					*edits = append(*edits, jsonspan.Edit{Start: v, End: e, Repl: t.objects[depth+1]})
				}
			}
		}
		tail = e
		return e
	})
	if end < 0 || found {
		return end
	}
	if tail < 0 {
		// An empty object: the member goes right after the brace.
		open := jsonspan.SkipSpace(doc, start) + 1
		*edits = append(*edits, jsonspan.Edit{Start: open, End: open, Repl: t.members[depth]})
		return end
	}
	repl := make([]byte, 0, len(t.members[depth])+1)
	repl = append(append(repl, ','), t.members[depth]...)
	*edits = append(*edits, jsonspan.Edit{Start: tail, End: tail, Repl: repl})
	return end
}

// Interface guards
var (
	_ caddy.Provisioner          = (*FieldSet)(nil)
	_ caddyfile.Unmarshaler      = (*FieldSet)(nil)
	_ transforms.RequestRewriter = (*FieldSet)(nil)
)
