package schemaargs

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// validate checks the JSON instance against the JSON Schema schema with an
// independent validator (formats asserted). compiled is false when the
// validator cannot read the schema (e.g. draft-03's "required": true under
// its default draft), which is no verdict on the instance.
func validate(t testing.TB, schema, instance []byte) (compiled bool, err error) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return false, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		return false, err
	}
	sch, err := c.Compile("mem://schema.json")
	if err != nil {
		return false, err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(instance))
	if err != nil {
		return true, fmt.Errorf("instance is not JSON: %w", err)
	}
	return true, sch.Validate(inst)
}
