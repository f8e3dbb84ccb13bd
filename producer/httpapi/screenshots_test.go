package httpapi_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEveryScreenshotIsShownByTheDocs: docs/screenshots holds only what
// README.md, ARCHITECTURE.md or docs/ show; the browser tests write the
// others as their artifacts only (saveScreenshot).
func TestEveryScreenshotIsShownByTheDocs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "screenshots", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("docs/screenshots: %v, %d files", err, len(files))
	}
	for _, f := range files {
		if !docsLink(t, filepath.Base(f)) {
			t.Errorf("docs/screenshots/%s is shown by no page of the docs: link it where it teaches something, or delete it", filepath.Base(f))
		}
	}
	if _, err := os.Stat(filepath.Join("..", "..", "README.md")); err != nil {
		t.Fatal(err)
	}
}
