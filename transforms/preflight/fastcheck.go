package preflight

import (
	"sync"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Most tools declare plain schemas: an object of typed properties, some
// required, perhaps closed, with string enums and arrays of such. For
// those, whether arguments are valid is read in one walk over their bytes,
// without decoding them into Go values for the validator. The walk only
// ever says "valid" when the validator would: anything it does not know
// for sure (a keyword outside the plain set, 1.0 for an integer, an
// escaped enum value) sends the call to the validator, which also writes
// the problems of an invalid call.

// plain is a schema of the plain set, compiled for the walk.
type plain struct {
	types      uint8 // the JSON types allowed (typeString…); 0: any
	props      map[string]*plain
	required   []string
	closed     bool     // additionalProperties: false
	items      *plain   // arrays' items; nil: any
	enum       [][]byte // string values, raw and unescaped in the schema
	enumString bool
}

const (
	typeString uint8 = 1 << iota
	typeNumber
	typeInteger
	typeBoolean
	typeNull
	typeObject
	typeArray
)

var typeBits = map[string]uint8{"string": typeString, "number": typeNumber, "integer": typeInteger,
	"boolean": typeBoolean, "null": typeNull, "object": typeObject, "array": typeArray}

// plainSchemas caches the compiled plans by schema bytes, as compiled
// schemas are (nil: the schema is not plain).
var plainSchemas = struct {
	sync.Mutex
	m map[string]*plain
}{m: map[string]*plain{}}

func plainFor(raw []byte) *plain {
	plainSchemas.Lock()
	p, ok := plainSchemas.m[string(raw)]
	plainSchemas.Unlock()
	if ok {
		return p
	}
	p, plainOK := compilePlain(raw, 0, 0)
	if !plainOK {
		p = nil
	}
	plainSchemas.Lock()
	if len(plainSchemas.m) >= maxCompiledSchemas {
		clear(plainSchemas.m)
	}
	plainSchemas.m[string(raw)] = p
	plainSchemas.Unlock()
	return p
}

// compilePlain compiles the schema at doc[at]; false when it is not in the
// plain set.
func compilePlain(doc []byte, at, depth int) (*plain, bool) {
	if depth > 32 || at >= len(doc) || doc[at] != '{' {
		return nil, false
	}
	p := &plain{}
	ok := true
	jsonspan.EachMember(doc, at, func(m jsonspan.Member) bool {
		v := m.Value
		switch jsonspan.KeyName(doc, m.Key) {
		case "description", "title", "default", "examples", "$schema", "$comment", "format":
			// Annotations; format is not asserted.
		case "type":
			switch doc[v.Start] {
			case '"':
				s, _ := jsonspan.StringValue(doc, v)
				if p.types = typeBits[s]; p.types == 0 {
					ok = false
				}
			case '[':
				jsonspan.EachElement(doc, v.Start, func(el jsonspan.Span) bool {
					s, _ := jsonspan.StringValue(doc, el)
					b := typeBits[s]
					if b == 0 {
						ok = false
					}
					p.types |= b
					return ok
				})
			default:
				ok = false
			}
		case "properties":
			if doc[v.Start] != '{' {
				ok = false
				break
			}
			p.props = map[string]*plain{}
			jsonspan.EachMember(doc, v.Start, func(pm jsonspan.Member) bool {
				sub, good := compilePlain(doc, pm.Value.Start, depth+1)
				if !good {
					ok = false
					return false
				}
				name, _ := jsonspan.StringValue(doc, pm.Key)
				p.props[name] = sub
				return true
			})
		case "required":
			if doc[v.Start] != '[' {
				ok = false
				break
			}
			jsonspan.EachElement(doc, v.Start, func(el jsonspan.Span) bool {
				s, good := jsonspan.StringValue(doc, el)
				if !good {
					ok = false
				}
				p.required = append(p.required, s)
				return ok
			})
		case "additionalProperties":
			switch {
			case jsonspan.IsNull(doc, v):
				ok = false
			case string(doc[v.Start:v.End]) == "false":
				p.closed = true
			case string(doc[v.Start:v.End]) == "true":
			default:
				ok = false
			}
		case "items":
			sub, good := compilePlain(doc, v.Start, depth+1)
			if !good {
				ok = false
			}
			p.items = sub
		case "enum":
			if doc[v.Start] != '[' {
				ok = false
				break
			}
			p.enumString = true
			jsonspan.EachElement(doc, v.Start, func(el jsonspan.Span) bool {
				lit := doc[el.Start:el.End]
				if lit[0] != '"' || hasBackslash(lit) {
					ok = false
				}
				p.enum = append(p.enum, lit)
				return ok
			})
		default:
			ok = false
		}
		return ok
	})
	return p, ok
}

func hasBackslash(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// valid reports whether the value at doc[at] surely matches p, and the
// value's end; false also when the walk cannot tell.
func (p *plain) valid(doc []byte, at int) (bool, int) {
	at = jsonspan.SkipSpace(doc, at)
	if at >= len(doc) {
		return false, -1
	}
	var t uint8
	switch c := doc[at]; {
	case c == '"':
		t = typeString
	case c == '{':
		t = typeObject
	case c == '[':
		t = typeArray
	case c == 't' || c == 'f':
		t = typeBoolean
	case c == 'n':
		t = typeNull
	default:
		t = typeNumber
	}
	switch {
	case p.types == 0:
	case t == typeNumber:
		end := jsonspan.SkipValue(doc, at)
		if end < 0 {
			return false, -1
		}
		if p.types&typeNumber == 0 {
			// An integer: only plain digits are surely one (1.0 is
			// too, but that is the validator's to say).
			if p.types&typeInteger == 0 || !plainInteger(doc[at:end]) {
				return false, end
			}
		}
		return true, end
	case p.types&t == 0:
		return false, -1
	}
	switch t {
	case typeObject:
		return p.object(doc, at)
	case typeArray:
		ok := true
		end := jsonspan.WalkElements(doc, at, func(el int) int {
			if p.items == nil {
				return jsonspan.SkipValue(doc, el)
			}
			good, e := p.items.valid(doc, el)
			if !good {
				ok = false
			}
			return e
		})
		return ok && end >= 0, end
	case typeString:
		end := jsonspan.SkipValue(doc, at)
		if end < 0 {
			return false, -1
		}
		if p.enumString {
			for _, e := range p.enum {
				if string(e) == string(doc[at:end]) {
					return true, end
				}
			}
			return false, end
		}
		return true, end
	}
	end := jsonspan.SkipValue(doc, at)
	if p.enumString {
		return false, end
	}
	return end >= 0, end
}

func (p *plain) object(doc []byte, at int) (bool, int) {
	ok := true
	seen := 0 // required members seen, counted once each
	var found []bool
	if len(p.required) > 0 {
		found = make([]bool, len(p.required))
	}
	end := jsonspan.WalkMembers(doc, at, func(k jsonspan.Span, v int) int {
		name := jsonspan.KeyName(doc, k)
		if hasBackslash(doc[k.Start:k.End]) {
			ok = false // an escaped name: the validator's to read
		}
		for i, r := range p.required {
			if r == name && !found[i] {
				found[i] = true
				seen++
			}
		}
		sub, declared := p.props[name]
		if !declared {
			if p.closed {
				ok = false
			}
			return jsonspan.SkipValue(doc, v)
		}
		good, e := sub.valid(doc, v)
		if !good {
			ok = false
		}
		return e
	})
	return ok && end >= 0 && seen == len(p.required), end
}

func plainInteger(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 15 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
