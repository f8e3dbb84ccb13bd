package bulkreg_test

import (
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/bulkreg/bulkreg"

// internalMayImport is every package outside internal/ that a package under
// internal/ may import, and why it is still a leaf to depend on: each imports
// no bulkreg package at all (checked below), so an import of it does not run
// up the house.
var internalMayImport = map[string]string{
	module:                   "the domain types and defaults every binary shares (internal/config reads the defaults)",
	module + "/lua":          "the Redis scripts, embedded (internal/scriptbatch runs them)",
	module + "/productrules": "the registration API's contract (internal/sandbox, the reference API, checks against it)",
}

// TestInternalHoldsLeaves keeps internal/ for leaves: helpers that import
// nothing of bulkreg but other helpers and the allowed contract packages. A
// package that wires the domain together (devstack) or views it (termui)
// belongs above what it imports. Test files may import the domain to check
// a helper against it: they add no edge to the build.
func TestInternalHoldsLeaves(t *testing.T) {
	pkgs := goPackages(t, "internal")
	if len(pkgs) < 5 {
		t.Fatalf("found %d packages under internal/; the walk is broken", len(pkgs))
	}
	for dir, imports := range pkgs {
		for _, imp := range imports {
			if !strings.HasPrefix(imp, module) || strings.HasPrefix(imp, module+"/internal/") {
				continue
			}
			if _, ok := internalMayImport[imp]; !ok {
				t.Errorf("%s imports %s: a package under internal/ must be a leaf; move it above what it imports (see ARCHITECTURE.md), or, if %s imports no bulkreg package, allow it in internalMayImport with the reason", dir, imp, imp)
			}
		}
	}
	// An allowed package may itself import a helper under internal/ that
	// imports no bulkreg package at all (internal/jsonenc): the edge ends
	// there.
	for imp := range internalMayImport {
		dir := "." + strings.TrimPrefix(imp, module)
		for _, dep := range importsOf(t, dir) {
			if !strings.HasPrefix(dep, module) {
				continue
			}
			if strings.HasPrefix(dep, module+"/internal/") && !importsBulkreg(t, "."+strings.TrimPrefix(dep, module)) {
				continue
			}
			t.Errorf("%s is allowed to internal/ as a leaf but imports %s", imp, dep)
		}
	}
}

// goPackages returns the non-test imports of every Go package under root.
func goPackages(t *testing.T, root string) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") {
			return filepath.SkipDir
		}
		if imports, ok := tryImports(t, path); ok {
			pkgs[filepath.ToSlash(path)] = imports
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// importsBulkreg reports whether the package in dir imports any bulkreg package.
func importsBulkreg(t *testing.T, dir string) bool {
	t.Helper()
	return slices.ContainsFunc(importsOf(t, dir), func(dep string) bool { return strings.HasPrefix(dep, module) })
}

func importsOf(t *testing.T, dir string) []string {
	t.Helper()
	imports, ok := tryImports(t, dir)
	if !ok {
		t.Fatalf("%s holds no Go package", dir)
	}
	return imports
}

// tryImports reads a directory's package clause and imports; ok is false
// when it holds no Go files (a directory of directories).
func tryImports(t *testing.T, dir string) (imports []string, ok bool) {
	t.Helper()
	p, err := build.ImportDir(dir, 0)
	var none *build.NoGoError
	if errors.As(err, &none) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("read the package in %s: %v", dir, err)
	}
	return slices.Clone(p.Imports), true
}

// TestMakeRunsEveryModule: go's ./... stops at a nested go.mod, so a module
// the Makefile's MODULES leaves out would have its tests, vet, fuzz targets
// and vulnerability scan skipped by make test without a word. MODULES names
// each directory of the tree that holds a go.mod, and only those.
func TestMakeRunsEveryModule(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^MODULES\s*:=\s*(.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile sets no MODULES")
	}
	listed := strings.Fields(string(m[1]))
	var found []string
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			found = append(found, filepath.ToSlash(filepath.Dir(path)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(found, ".") {
		t.Fatalf("the walk found go.mod files in %v but not the root's; it is broken", found)
	}
	slices.Sort(found)
	slices.Sort(listed)
	if !slices.Equal(found, listed) {
		t.Errorf("the Makefile's MODULES is %v, but the directories holding a go.mod are %v: name each module there, so make test runs it", listed, found)
	}
}
