package messagesbridge

import (
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// RewriteRequest implements RequestRewriter: a Messages request becomes a
// Chat Completions request.
func (t *MessagesToChat) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	if x.Protocol() != transforms.ProtocolMessages {
		return body, nil
	}
	return nil, transforms.BadRequest("not_implemented", "", "messages_to_chat: the request mapping is being written")
}
