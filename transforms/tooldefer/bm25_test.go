package tooldefer

import (
	"strings"
	"testing"
)

func TestBM25RanksByNameDescriptionAndParameters(t *testing.T) {
	defs := map[string][]byte{
		"createIssue":        []byte(`{"type":"function","name":"createIssue","description":"Open a new GitHub issue.","parameters":{"type":"object","properties":{"repo":{},"title":{}}}}`),
		"list_pull_requests": []byte(`{"type":"function","name":"list_pull_requests","description":"List the pull requests of a repository.","parameters":{"type":"object","properties":{"state":{}}}}`),
		"send_email":         []byte(`{"type":"function","function":{"name":"send_email","description":"Send a message to a recipient.","parameters":{"type":"object","properties":{"to":{},"subject":{}}}}}`),
		"HTTPGet":            []byte(`{"type":"function","name":"HTTPGet","description":"Fetch a URL.","parameters":{"type":"object","properties":{"url":{}}}}`),
	}
	names := []string{"createIssue", "list_pull_requests", "send_email", "HTTPGet"}
	ix := newBM25(names, defs)
	for _, c := range []struct {
		query string
		want  string
	}{
		{"create github issue", "createIssue"},
		{"open pull requests", "list_pull_requests"},
		{"email subject", "send_email"},
		{"http get url", "HTTPGet"},
		{"zebra", ""},
	} {
		got := ix.search(c.query, 2)
		first := ""
		if len(got) > 0 {
			first = got[0]
		}
		if first != c.want {
			t.Errorf("%q: %v, want %q first", c.query, got, c.want)
		}
	}
	if got := strings.Join(words("createIssue HTTPServer v2_api"), " "); got != "create issue http server v2 api" {
		t.Errorf("words: %q", got)
	}
}
