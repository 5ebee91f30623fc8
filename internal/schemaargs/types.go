package schemaargs

// typeMask is a set of JSON Schema types. "number" is integer and
// fraction together, so that intersecting "number" with "integer" leaves
// integer.
type typeMask uint8

const (
	tNull typeMask = 1 << iota
	tBool
	tObj
	tArr
	tStr
	tInt  // integral numbers
	tFrac // numbers with a fraction

	tNumber = tInt | tFrac
	tAll    = tNull | tBool | tObj | tArr | tStr | tNumber
)

// maskOf is the set a type name stands for. BFCL's Python names (dict,
// float, list, tuple, any) are read as what they mean; an unknown name
// does not constrain.
func maskOf(name string) typeMask {
	switch name {
	case "null":
		return tNull
	case "boolean":
		return tBool
	case "object", "dict":
		return tObj
	case "array", "list", "tuple":
		return tArr
	case "string":
		return tStr
	case "integer":
		return tInt
	case "number", "float":
		return tNumber
	}
	return tAll
}

// typeNames lists the type names of a schema's "type" member in order:
// one for a string, each string of a list.
func typeNames(t *node) []string {
	if t == nil {
		return nil
	}
	switch t.k {
	case kStr:
		return []string{t.s}
	case kArr:
		names := make([]string, 0, len(t.arr))
		for _, v := range t.arr {
			if v.k == kStr {
				names = append(names, v.s)
			}
		}
		return names
	}
	return nil
}

// typesOf is the set of types the schema object s allows by its "type"
// member; declared is false when it has none.
func typesOf(s *node) (m typeMask, declared bool) {
	t := s.get("type")
	if t == nil {
		return tAll, false
	}
	for _, name := range typeNames(t) {
		m |= maskOf(name)
	}
	return m, true
}

// valueMask is the type of the JSON value v.
func valueMask(v *node) typeMask {
	switch v.k {
	case kNull:
		return tNull
	case kBool:
		return tBool
	case kObj:
		return tObj
	case kArr:
		return tArr
	case kStr:
		return tStr
	}
	if f, ok := v.num(); ok && f == float64(int64(f)) {
		return tInt
	}
	return tFrac
}

// allows reports whether every schema object in list admits a value of
// type vm by its type and, where it has one, its enum (a string-only enum
// admits strings only, whatever its type says).
func allows(list []*node, vm typeMask) bool {
	for _, s := range list {
		if vm == tNull && s.get("nullable").isTrue() {
			continue // OpenAPI's null, enum or not
		}
		if m, _ := typesOf(s); m&vm == 0 {
			return false
		}
		if e := s.get("enum"); e != nil && e.k == kArr {
			found := false
			for _, v := range e.arr {
				if mm := valueMask(v); mm&vm != 0 || (mm&tNumber != 0 && vm&tNumber != 0) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
	}
	return true
}
