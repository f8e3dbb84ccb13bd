package messages

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryKeyIsSaidSomewhere: every sentence of the table is one bulkreg
// can say. The module's code (tests apart) names each key as a string, or
// builds it: a code and its variant (code + "." + kind, the kind a
// parameter's value, so both are strings in the code), or a prefix and a
// value ("result." + result). A key nothing names or builds is a sentence
// no seller meets that every translation still carries.
func TestEveryKeyIsSaidSomewhere(t *testing.T) {
	var src strings.Builder
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == filepath.Join("..", "messages", "messages.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		src.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	code := src.String()
	named := func(s string) bool { return strings.Contains(code, `"`+s+`"`) }
	if !named("result.") || !named("not_whole_number") {
		t.Fatalf("the module's code was not read (%d bytes)", len(code))
	}
	// bad_message is the sentence of a row whose Kafka message cannot be
	// read; the consumer hands such a message to an operator without a row
	// result, and TestTheCodesSellersMeetAreInTheTable keeps the sentence.
	kept := map[string]bool{"bad_message": true}
	for _, k := range Keys() {
		if named(k) || kept[k] {
			continue
		}
		if base, variant, ok := strings.Cut(k, "."); ok && (named(base+".") || named(base) && named(variant)) {
			continue
		}
		t.Errorf("%q is said nowhere: no code names it or builds it", k)
	}
}
