package transforms

// Chat Completions shapes of field_custom_tools_to_function.

func (p *requestPlan) chatDescriptor(el span, name string) []byte { return nil }
func (p *requestPlan) walkMessages(start int) int                 { return skipValue(p.doc, start) }
func (t *customTools) chatResponse(x *Exchange, body []byte) ([]byte, error) {
	return body, nil
}
func (t *customTools) newChatStream(x *Exchange, r *customRecord) StreamTransform { return nil }
