package caddymodule

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// The collectors live for the whole process and are registered with each
// config's registry on Provision: Caddy hands every config a fresh registry,
// and collectors created per config would start from zero after a reload
// (the bug caddy-ratelimit#102 fixed).
var metrics = struct {
	applications   *prometheus.CounterVec
	converted      *prometheus.CounterVec
	restored       *prometheus.CounterVec
	rejections     *prometheus.CounterVec
	buffered       *prometheus.HistogramVec
	streamErrors   *prometheus.CounterVec
	patchInvalid   prometheus.Counter
	unexpected     *prometheus.CounterVec
	dropped        prometheus.Counter
	argsUnrestored *prometheus.CounterVec
	rounds         *prometheus.CounterVec
	tallies        map[string]*prometheus.CounterVec
	ruleEvents     *prometheus.CounterVec
}{
	rounds: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "llm_transform", Name: "rounds_total",
		Help: "Upstream requests rules added to client requests (gateway rounds), by reason and outcome (answered, failed, client_gone).",
	}, []string{"reason", "outcome"}),
	// The events tools_preflight and tools_defer count (Exchange.Tally),
	// each a counter of its own named after it, labelled by reason.
	tallies: tallyCounters(map[string]string{
		"preflight_invalid":  "Upstream calls tools_preflight found invalid, by reason (unknown_tool, invalid_json, schema, markup).",
		"preflight_repaired": "Invalid calls tools_preflight repaired before the client saw them, by how (code_fence, trailing_comma, bom, name, markup, reask).",
		"preflight_failed":   "Calls still invalid after tools_preflight's last re-ask, by the outcome configured (pass, drop, error).",
		"preflight_dedup":    "Calls tools_preflight removed as repeats of an earlier call of the same answer.",
		"defer_searches":     "Tool searches tools_defer answered for the model, by outcome (found, none, no_round, failed).",
		"defer_tools_loaded": "Deferred tools tools_defer sent the upstream, by why (history, search).",
	}),
	ruleEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "llm_transform", Name: "rule_events_total",
		Help: "Events other transforms count (Exchange.Tally), by transform, event and label.",
	}, []string{"transform", "event", "label"}),
	applications: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "llm_transform", Name: "rule_applications_total",
		Help: "Rules that changed a request or response, by transform, phase and scope.",
	}, []string{"transform", "phase", "scope"}),
	converted: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "llm_transform", Name: "converted_total",
		Help: "Tool definitions and calls rewritten on the way to the upstream, by protocol.",
	}, []string{"protocol"}),
	restored: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "llm_transform", Name: "restored_total",
		Help: "Upstream tool calls given back their client-side shape, by protocol.",
	}, []string{"protocol"}),
	rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "llm_transform", Name: "rejections_total",
		Help: "Requests and responses the gateway refused, by error code.",
	}, []string{"reason"}),
	buffered: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "caddy", Subsystem: "llm_transform", Name: "buffered_bytes",
		Help: "Bytes held in memory per call: kind request_body and response_body per HTTP call, tool_call per converted tool call.",
		// 1 KiB to 64 MiB: the defaults are 32 MiB per body and 8 MiB per call.
		Buckets: prometheus.ExponentialBuckets(1024, 4, 9),
	}, []string{"kind"}),
	streamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "llm_transform", Name: "stream_errors_total",
		Help: "Rewritten streams that did not end normally, by reason.",
	}, []string{"reason"}),
	patchInvalid: prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "llm_transform", Name: "patch_invalid_total",
		Help: "Restored apply_patch inputs that still fail Codex's patch grammar after normalisation.",
	}),
	unexpected: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "llm_transform", Name: "unexpected_calls_total",
		Help: "Upstream calls to tools the request did not offer, by reason: undeclared (never declared) or filtered (a rule took the tool out).",
	}, []string{"reason"}),
	argsUnrestored: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "llm_transform", Name: "args_unrestored_total",
		Help: "Upstream calls whose arguments could not be given back in the tool's own schema (passed on as sent), by reason.",
	}, []string{"reason"}),
	dropped: prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "llm_transform", Name: "dropped_calls_total",
		Help: "Unexpected upstream calls removed from responses (tools_filter drop_undeclared_calls).",
	}),
}

// registerMetrics adds the collectors to a config's registry. Several
// handlers share one config, so finding them already there is normal.
func registerMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{
		metrics.applications, metrics.converted, metrics.restored,
		metrics.rejections, metrics.buffered, metrics.streamErrors, metrics.patchInvalid,
		metrics.unexpected, metrics.dropped, metrics.argsUnrestored, metrics.rounds, metrics.ruleEvents,
	} {
		if err := register(reg, c); err != nil {
			return err
		}
	}
	for _, c := range metrics.tallies {
		if err := register(reg, c); err != nil {
			return err
		}
	}
	return nil
}

// register adds c to reg; finding it there already is normal.
func register(reg prometheus.Registerer, c prometheus.Collector) error {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return err
		}
	}
	return nil
}

// observeExchange records what the rules did to one request.
func observeExchange(x *transforms.Exchange) {
	for _, a := range x.Applications() {
		metrics.applications.WithLabelValues(a.Rule.TransformID(), a.Phase.String(), a.Rule.Scope().String()).Inc()
	}
	c := x.Counts()
	if c.Converted > 0 {
		metrics.converted.WithLabelValues(x.ClientProtocol().String()).Add(float64(c.Converted))
	}
	if c.Restored > 0 {
		metrics.restored.WithLabelValues(x.ClientProtocol().String()).Add(float64(c.Restored))
	}
	if c.PatchInvalid > 0 {
		metrics.patchInvalid.Add(float64(c.PatchInvalid))
	}
	if c.UndeclaredCalls > 0 {
		metrics.unexpected.WithLabelValues("undeclared").Add(float64(c.UndeclaredCalls))
	}
	if c.FilteredCalls > 0 {
		metrics.unexpected.WithLabelValues("filtered").Add(float64(c.FilteredCalls))
	}
	if c.DroppedCalls > 0 {
		metrics.dropped.Add(float64(c.DroppedCalls))
	}
	if c.ArgsUnrestored != (transforms.UnrestoredArgs{}) {
		for reason, n := range c.ArgsUnrestored.Reasons() {
			if n > 0 {
				metrics.argsUnrestored.WithLabelValues(reason).Add(float64(n))
			}
		}
	}
	for _, t := range x.Tallies() {
		if c, ok := metrics.tallies[t.Event]; ok {
			c.WithLabelValues(t.Label).Add(float64(t.N))
		} else {
			metrics.ruleEvents.WithLabelValues(t.Transform, t.Event, t.Label).Add(float64(t.N))
		}
	}
	for _, n := range x.CallBuffers() {
		metrics.buffered.WithLabelValues("tool_call").Observe(float64(n))
	}
}

// tallyCounters makes a counter, labelled by reason, for each event a
// transform counts: caddy_llm_transform_<event>_total.
func tallyCounters(help map[string]string) map[string]*prometheus.CounterVec {
	m := make(map[string]*prometheus.CounterVec, len(help))
	for event, h := range help {
		m[event] = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "caddy", Subsystem: "llm_transform", Name: event + "_total", Help: h,
		}, []string{"reason"})
	}
	return m
}
