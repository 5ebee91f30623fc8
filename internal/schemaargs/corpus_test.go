package schemaargs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// corpusDir holds the project's real tool schemas, beside the repository.
const corpusDir = "../../../shared/fixtures/tool-schemas"

// TestGenerateCorpus generates minimal and full arguments for every real
// tool schema and checks each against the schema with an independent
// validator; at least 90% must generate.
func TestGenerateCorpus(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*.json"))
	if len(files) == 0 {
		t.Skip("no tool-schema corpus at " + corpusDir)
	}
	total, generated, unchecked := 0, 0, 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tool struct {
			ID         string          `json:"id"`
			Parameters json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal(data, &tool); err != nil || len(tool.Parameters) == 0 {
			continue // README and the like
		}
		for _, full := range []bool{false, true} {
			total++
			args, ok := Generate(tool.Parameters, full)
			if !ok {
				t.Logf("%s full=%v: not generated", tool.ID, full)
				continue
			}
			generated++
			compiled, err := validate(t, tool.Parameters, args)
			switch {
			case !compiled:
				unchecked++
				t.Logf("%s: validator cannot read the schema: %v", tool.ID, err)
			case err != nil:
				t.Errorf("%s full=%v: %s invalid: %v", tool.ID, full, args, err)
			}
			if testing.Verbose() {
				t.Logf("%s full=%v: %s", tool.ID, full, args)
			}
		}
	}
	t.Logf("generated %d of %d (%.1f%%), %d not checked by the validator", generated, total, 100*float64(generated)/float64(total), unchecked)
	if generated*10 < total*9 {
		t.Errorf("generated %d of %d: under 90%%", generated, total)
	}
}
