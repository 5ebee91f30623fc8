package fakeprovider

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/tidwall/gjson"
)

// OpenAIMaxTools is the most tools OpenAI takes in one request, on Chat
// Completions and Responses alike.
const OpenAIMaxTools = 128

// TooManyToolsMessage is OpenAI's refusal of a tools array of n entries
// over a cap of max, as it answers it (400 invalid_request_error, param
// tools, code array_above_max_length).
func TooManyToolsMessage(max, n int) string {
	return fmt.Sprintf("Invalid 'tools': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", max, n)
}

// ToolCap is a provider's cap on the tools one request declares, in front
// of the provider itself: a POST whose JSON body has a top-level tools
// array of more than Max entries is answered 400 in OpenAI's shape and
// words (TooManyToolsMessage, code array_above_max_length) and never
// reaches Next; anything else goes on to Next with its body as it came.
type ToolCap struct {
	// Max is the most tools a request may declare; 0 means
	// OpenAIMaxTools.
	Max int

	// Next serves what passes the cap.
	Next http.Handler

	mu      sync.Mutex
	refused []int // the tool counts refused, in order
}

// ServeHTTP implements http.Handler.
func (c *ToolCap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeError(w, http.StatusBadRequest, "could not read the request body: "+err.Error(), "", "")
			return
		}
		max := c.Max
		if max <= 0 {
			max = OpenAIMaxTools
		}
		if tools := gjson.GetBytes(body, "tools"); tools.IsArray() {
			if n := len(tools.Array()); n > max {
				c.mu.Lock()
				c.refused = append(c.refused, n)
				c.mu.Unlock()
				writeError(w, http.StatusBadRequest, TooManyToolsMessage(max, n), "tools", "array_above_max_length")
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	c.Next.ServeHTTP(w, r)
}

// Refused returns the tool counts of the requests the cap refused, oldest
// first.
func (c *ToolCap) Refused() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.refused...)
}

var _ http.Handler = (*ToolCap)(nil)
