package transforms

import (
	"encoding/json"
	"fmt"
	"testing"
)

func rfTry(t *testing.T, p Protocol, cfg, body string) (out []byte, x *Exchange, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return tfRun(t, p, cfg, body)
}

func nsTry(t *testing.T, cfg string, p Protocol, body string) (out []byte, x *Exchange, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return nsRun(t, cfg, p, body)
}

func TestFixReviewProbe(t *testing.T) {
	off := `{"function_calling":"off"}`
	call := `{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`
	at := `{"type":"additional_tools","tools":[{"type":"function","name":"g"}]}`
	outp := `{"type":"function_call_output","call_id":"c1","output":"ok"}`
	msg := `{"type":"message","role":"user","content":"hi"}`
	for _, in := range [][]string{
		{call, at, at, msg}, {call, at, at}, {outp, at, at}, {call, at}, {at, call}, {at, at, call, at, at}, {call, at, outp, at, at},
	} {
		body := `{"model":"m","input":[` + join(in) + `]}`
		out, _, err := rfTry(t, ProtocolResponses, off, body)
		t.Logf("%s\n  -> %s %v", body, out, err)
	}
	deny := `{"deny":["delete_*"]}`
	for _, body := range []string{
		`{"model":"m","input":"hi","tools":[{"type":"function","tools":[{"name":"a","name":"b"}],"name":"read_file","name":"delete_file"}]}`,
		`{"model":"m","input":"hi","tools":[{"type":"function","name":"read_file","tools":null}]}`,
		`{"model":"m","input":[{"type":"additional_tools","tools":[{"type":"function","name":"read_file"}],"tools":[{"type":"function","name":"delete_file"}]}]}`,
		`{"model":"m","input":[{"type":"additional_tools","tools":[{"type":"function","name":"read_file"}]}],"input":[{"type":"additional_tools","tools":[{"type":"function","name":"delete_file"}]}]}`,
	} {
		out, x, err := rfTry(t, ProtocolResponses, deny, body)
		t.Logf("%s\n  -> %s %v %v", body, out, err, x.Decisions())
	}
	for _, body := range []string{
		`{"model":"m","messages":[],"function\u0073":[{"name":"delete_file"}]}`,
		`{"model":"m","messages":[],"functions":[{"name":"read_file","name":"delete_file"}]}`,
		`{"functions":[{"name":"delete_file"}]}`,
		`{"model":"m","messages":[],"tools":[{"function":{"name":"delete_file"}}]}`,
	} {
		out, x, err := rfTry(t, ProtocolChat, `{"deny":["delete_*"],"defaults":[{"type":"function","function":{"name":"lookup"}}]}`, body)
		t.Logf("%s\n  -> %s %v %v", body, out, err, x.Decisions())
	}
}

func join(s []string) string {
	out := ""
	for i, e := range s {
		if i > 0 {
			out += ","
		}
		out += e
	}
	return out
}

func rfPerms(a []string) [][]string {
	if len(a) <= 1 {
		return [][]string{append([]string(nil), a...)}
	}
	var out [][]string
	for i := range a {
		rest := append(append([]string(nil), a[:i]...), a[i+1:]...)
		for _, p := range rfPerms(rest) {
			out = append(out, append([]string{a[i]}, p...))
		}
	}
	return out
}

func TestFixReviewProbePerms(t *testing.T) {
	members := map[string]string{
		"functions":           `"functions":[{"name":"delete_a"},{"name":"delete_b"}]`,
		"function_call":       `"function_call":"auto"`,
		"tools":               `"tools":[{"type":"function","function":{"name":"delete_c"}}]`,
		"tool_choice":         `"tool_choice":"auto"`,
		"parallel_tool_calls": `"parallel_tool_calls":true`,
	}
	keys := []string{"functions", "function_call", "tools", "tool_choice", "parallel_tool_calls"}
	bad := 0
	for _, p := range rfPerms(keys) {
		for _, shape := range []int{0, 1, 2, 3} {
			parts := []string{}
			for _, k := range p {
				parts = append(parts, members[k])
			}
			var body string
			switch shape {
			case 0:
				body = `{"model":"m","messages":[],` + join(parts) + `}`
			case 1:
				body = `{` + join(parts) + `,"model":"m","messages":[]}`
			case 2:
				body = `{"model":"m",` + join(parts[:2]) + `,"messages":[],` + join(parts[2:]) + `}`
			case 3:
				body = "{ \"model\":\"m\" ,\n " + join(parts) + " , \"messages\":[] }"
			}
			out, _, err := rfTry(t, ProtocolChat, `{"deny":["delete_*"]}`, body)
			if err != nil {
				bad++
				t.Logf("%s -> %v", body, err)
				continue
			}
			var v map[string]any
			if e := jsonUnmarshal(out, &v); e != nil || len(v) != 2 {
				bad++
				t.Logf("%s -> %s", body, out)
			}
		}
	}
	t.Logf("bad %d", bad)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func TestFixReviewProbePerms2(t *testing.T) {
	type variant struct {
		cfg     string
		members map[string]string
		want    int
	}
	vs := []variant{
		{`{"deny":["delete_*"]}`, map[string]string{
			"functions":           `"functions":[{"name":"delete_a"},{"name":"read_b"}]`,
			"function_call":       `"function_call":{"name":"read_b"}`,
			"tools":               `"tools":[{"type":"function","function":{"name":"delete_c"}}]`,
			"tool_choice":         `"tool_choice":"auto"`,
			"parallel_tool_calls": `"parallel_tool_calls":true`,
		}, 4},
		{`{"deny":["delete_*"]}`, map[string]string{
			"functions":           `"functions":[{"name":"delete_a"}]`,
			"function_call":       `"function_call":"none"`,
			"tools":               `"tools":[{"type":"function","function":{"name":"delete_c"}},{"type":"function","function":{"name":"read_c"}}]`,
			"tool_choice":         `"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"delete_c"}},{"type":"function","function":{"name":"read_c"}}]}}`,
			"parallel_tool_calls": `"parallel_tool_calls":true`,
		}, 5},
		{`{"function_calling":"off"}`, map[string]string{
			"functions":           `"functions":[{"name":"delete_a"}]`,
			"function_call":       `"function_call":"none"`,
			"tools":               `"tools":[{"type":"function","function":{"name":"delete_c"}}]`,
			"tool_choice":         `"tool_choice":"auto"`,
			"parallel_tool_calls": `"parallel_tool_calls":true`,
		}, 2},
		{`{"deny":["delete_*"],"defaults":[{"type":"function","function":{"name":"lookup"}}]}`, map[string]string{
			"functions":           `"functions":[{"name":"delete_a"}]`,
			"function_call":       `"function_call":"none"`,
			"tools":               `"tools":null`,
			"tool_choice":         `"tool_choice":"auto"`,
			"parallel_tool_calls": `"parallel_tool_calls":true`,
		}, 5},
	}
	keys := []string{"functions", "function_call", "tools", "tool_choice", "parallel_tool_calls"}
	for vi, vr := range vs {
		bad := 0
		for _, p := range rfPerms(keys) {
			for _, shape := range []int{0, 1, 2, 3} {
				parts := []string{}
				for _, k := range p {
					parts = append(parts, vr.members[k])
				}
				var body string
				switch shape {
				case 0:
					body = `{"model":"m","messages":[],` + join(parts) + `}`
				case 1:
					body = `{` + join(parts) + `,"model":"m","messages":[]}`
				case 2:
					body = `{"model":"m",` + join(parts[:2]) + `,"messages":[],` + join(parts[2:]) + `}`
				case 3:
					body = "{ \"model\":\"m\" ,\n " + join(parts) + " , \"messages\":[] }"
				}
				out, _, err := rfTry(t, ProtocolChat, vr.cfg, body)
				if err != nil {
					bad++
					t.Logf("%s -> %v", body, err)
					continue
				}
				var v map[string]any
				if e := jsonUnmarshal(out, &v); e != nil || len(v) != vr.want {
					bad++
					t.Logf("%s -> %s", body, out)
				}
			}
		}
		t.Logf("variant %d bad %d", vi, bad)
	}
}
