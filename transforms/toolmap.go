package transforms

import "slices"

// ToolID is a tool's identity on one side of a rule: the wire type of its
// definition ("function", "custom", "local_shell", …), its namespace ("" for
// none) and its name.
type ToolID struct {
	Type, Namespace, Name string
}

func (id ToolID) String() string {
	if id.Namespace == "" {
		return id.Name
	}
	return id.Namespace + "." + id.Name
}

// Display names a tool for decisions: namespace/name, or its type when it
// has no name.
func (id ToolID) Display() string {
	switch {
	case id.Name == "":
		return id.Type
	case id.Namespace == "" || id.Type == "namespace":
		return id.Name
	}
	return id.Namespace + "/" + id.Name
}

// ToolMap is a request's tool identity map: every rule that changes how a
// tool looks to the upstream (its type, name or namespace) links the
// identity it was handed to the one it passed on. Links are kept per rule,
// so a rule restores only its own work, and a later rule can follow the
// links back to what the client declared. Lookups are constant time: a
// request may carry thousands of tools.
type ToolMap struct {
	up     map[toolKey]ToolID // (owner, client side) -> upstream side
	client map[toolKey]ToolID // (owner, upstream side) -> client side
	owners []any              // in the order they first linked: the chain's
	links  int
}

type toolKey struct {
	owner any
	id    ToolID
}

// Link records that owner (a rule's record key) turned the identity client
// into upstream. A later link of the same owner for the same identity
// replaces the earlier one.
func (m *ToolMap) Link(owner any, client, upstream ToolID) {
	if m.up == nil {
		m.up = map[toolKey]ToolID{}
		m.client = map[toolKey]ToolID{}
	}
	if !slices.Contains(m.owners, owner) {
		m.owners = append(m.owners, owner)
	}
	m.up[toolKey{owner, client}] = upstream
	m.client[toolKey{owner, upstream}] = client
	m.links++
}

// Reserve makes room for n more links: a plan links every tool of a large
// request at once.
func (m *ToolMap) Reserve(n int) {
	if m.up == nil && n > 0 {
		m.up = make(map[toolKey]ToolID, n)
		m.client = make(map[toolKey]ToolID, n)
	}
}

// Upstream returns what owner turned the client identity into.
func (m *ToolMap) Upstream(owner any, client ToolID) (ToolID, bool) {
	id, ok := m.up[toolKey{owner, client}]
	return id, ok
}

// Client returns the identity owner turned into upstream.
func (m *ToolMap) Client(owner any, upstream ToolID) (ToolID, bool) {
	id, ok := m.client[toolKey{owner, upstream}]
	return id, ok
}

// Len is the number of links recorded.
func (m *ToolMap) Len() int { return m.links }

// Origin follows every rule's links back from an identity seen on the
// upstream side of the rules that linked so far to the identity the client
// declared (the identity itself when no rule changed it).
func (m *ToolMap) Origin(id ToolID) ToolID {
	for i := len(m.owners) - 1; i >= 0; i-- {
		if c, ok := m.client[toolKey{m.owners[i], id}]; ok {
			id = c
		}
	}
	return id
}
