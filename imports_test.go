package throttle_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCoreImports checks that the core package imports neither
// OpenTelemetry nor Prometheus: their exporters live in otelthrottle and
// promthrottle, so that users of neither pay for them. It reads the
// imports of the root's non-test files.
func TestCoreImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			for _, banned := range []string{"go.opentelemetry.io/", "github.com/prometheus/"} {
				if strings.HasPrefix(path, banned) {
					t.Errorf("%s imports %s", name, path)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no non-test file read")
	}
}
