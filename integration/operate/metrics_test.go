package operate

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// scrape reads the admin endpoint's /metrics into series → value.
func scrape(t *testing.T) map[string]float64 {
	t.Helper()
	code, body := adminDo(t, http.MethodGet, "/metrics", "", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "caddy_llm_transform_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// delta checks that each series grew by exactly the given amount.
func delta(t *testing.T, when string, before, after map[string]float64, want map[string]float64) {
	t.Helper()
	for k, d := range want {
		if got := after[k] - before[k]; got != d {
			t.Errorf("%s: %s grew by %v, want %v", when, k, got, d)
		}
	}
}

const (
	mFieldSet   = `caddy_llm_transform_rule_applications_total{phase="request",scope="global",transform="field_set"}`
	mConvertReq = `caddy_llm_transform_rule_applications_total{phase="request",scope="provider",transform="field_custom_tools_to_function"}`
	mRestoreRes = `caddy_llm_transform_rule_applications_total{phase="response",scope="provider",transform="field_custom_tools_to_function"}`
	mConverted  = `caddy_llm_transform_converted_total{protocol="responses"}`
	mRestored   = `caddy_llm_transform_restored_total{protocol="responses"}`
	mConflict   = `caddy_llm_transform_rejections_total{reason="custom_tool_conflict"}`
	mTooLarge   = `caddy_llm_transform_rejections_total{reason="request_too_large"}`
	mBufferErr  = `caddy_llm_transform_stream_errors_total{reason="max_call_buffer_exceeded"}`
	mReqBodies  = `caddy_llm_transform_buffered_bytes_count{kind="request_body"}`
	mRespBodies = `caddy_llm_transform_buffered_bytes_count{kind="response_body"}`
)

func metricsConfig(up, tier string) string {
	return globalOptions(`
	llm_transform {
		rule field_set {
			path tier
			value `+tier+`
		}
	}`) + site(`		max_body_size 4KiB
		max_call_buffer 16
		rule field_custom_tools_to_function`, up)
}

// traffic sends two converted JSON requests, one converted stream that
// outgrows max_call_buffer, one conflict and one oversized request.
func traffic(t *testing.T) {
	t.Helper()
	for range 2 {
		if resp, body := post(t, "/v1/responses", toolRequest); resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
	_, body := post(t, "/v1/responses", `{"model":"m","stream":true,"input":"x","tools":[{"type":"custom","name":"apply_patch"}]}`)
	if !strings.Contains(body, `"code":"max_call_buffer_exceeded"`) {
		t.Fatalf("stream: %s", body)
	}
	if resp, _ := post(t, "/v1/responses", `{"model":"m","tools":[{"type":"custom","name":"apply_patch"},{"type":"function","name":"apply_patch"}]}`); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("conflict: %d", resp.StatusCode)
	}
	if resp, _ := post(t, "/v1/responses", `{"model":"m","input":"`+strings.Repeat("x", 5000)+`"}`); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("too large: %d", resp.StatusCode)
	}
}

// TestMetricsKeepCountingAcrossReloads scrapes /metrics around traffic and
// a reload: the collectors are registered with each new config's registry
// and carry on from where they were.
func TestMetricsKeepCountingAcrossReloads(t *testing.T) {
	u := &fakeprovider.Provider{}
	up := startUpstream(t, u)
	newTester(t).InitServer(metricsConfig(up, "one"), "caddyfile")

	want := map[string]float64{
		// field_set runs on every request that reaches the rules: not on
		// the conflict (rejected by the rule before it) nor the oversized
		// one. The stream counts as a response application: its call
		// header went out restored before the call outgrew the buffer.
		mFieldSet: 3, mConvertReq: 3, mRestoreRes: 3,
		mConverted: 3, mRestored: 2,
		mConflict: 1, mTooLarge: 1, mBufferErr: 1,
		mReqBodies: 4, mRespBodies: 2,
	}
	before := scrape(t)
	traffic(t)
	first := scrape(t)
	delta(t, "first config", before, first, want)

	load(t, "text/caddyfile", metricsConfig(up, "two"))
	afterReload := scrape(t)
	delta(t, "right after the reload", first, afterReload, map[string]float64{mFieldSet: 0, mConverted: 0})
	if afterReload[mFieldSet] == 0 {
		t.Fatal("the series is gone after the reload")
	}
	traffic(t)
	if got := lastRequest(u).Get("tier").String(); got != "two" {
		t.Fatalf("reload not in effect: tier %q", got)
	}
	delta(t, "second config", afterReload, scrape(t), want)
}

// TestAdminRulesEndpoint lists the running config's rules with hit counts;
// keys appear as hash prefixes only.
func TestAdminRulesEndpoint(t *testing.T) {
	t.Setenv("OPERATE_TEAM_A_KEY", teamAKey)
	u := &fakeprovider.Provider{}
	up := startUpstream(t, u)
	newTester(t).InitServer(scopedConfig(up, "", ""), "caddyfile")
	post(t, "/v1/responses", toolRequest, "Authorization: Bearer "+teamAKey)
	post(t, "/v1/responses", toolRequest, "Authorization: Bearer "+teamAKey)
	post(t, "/v1/responses", toolRequest)
	post(t, "/v1/responses", `{"model":"m","tier":"provider"}`, "X-Api-Key: "+teamBKey)

	code, body := adminDo(t, http.MethodGet, "/llm_transform/rules", "", "")
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	a, b := teamAHash[:12], teamBHash[:12]
	// The last request already held the provider's value, so the provider
	// rule changed nothing there and has one hit less; custom tools had
	// nothing to convert in it.
	want := `{"handlers":[{"server":"srv0","index":0,"explain":true,
	"provider":[{"name":"rule 0 (field_set)","transform":"field_set","phase":"request","models":[],"hits":3}],
	"global":[
		{"name":"global rule 0 (field_custom_tools_to_function)","transform":"field_custom_tools_to_function","phase":"both","models":[],"hits":3},
		{"name":"global rule 1 (field_set)","transform":"field_set","phase":"request","models":[],"hits":4}],
	"api_keys":[
		{"key_sha256_prefix":"` + a + `","rules":[{"name":"api_key ` + a + ` rule 0 (field_set)","transform":"field_set","phase":"request","models":[],"hits":2}]},
		{"key_sha256_prefix":"` + b + `","rules":[{"name":"api_key ` + b + ` rule 0 (field_set)","transform":"field_set","phase":"request","models":[],"hits":1}]}]}]}`
	if got, w := compactJSON(t, body), compactJSON(t, want); got != w {
		t.Fatalf("rules:\n got %s\nwant %s", got, w)
	}
	if strings.Contains(body, teamAKey) || strings.Contains(body, teamBKey) {
		t.Fatal("a key appears in the listing")
	}
	if code, _ := adminDo(t, http.MethodPost, "/llm_transform/rules", "", ""); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", code)
	}
}
