package throttle_test

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/throttlekit/throttle/internal/moduletest"
)

// TestModuleRequirements checks that the root module's build list (go list
// -m all: its requirements and theirs) holds none of the modules only the
// nested modules need: the exporters' metrics libraries, the libraries the
// benchmarks compare against and the examples' embedded Redis and SDKs. A
// user of package throttle must find none of them in their go.sum.
func TestModuleRequirements(t *testing.T) {
	moduletest.CheckBuildList(t, append(moduletest.Compared, moduletest.OpenTelemetry, moduletest.Prometheus)...)
}

// TestCoreImports checks that the core package imports neither
// OpenTelemetry nor Prometheus: their exporters live in otelthrottle and
// promthrottle, so that users of neither pay for them. It reads the
// imports of the root's non-test files, then the root's whole build
// (go list -deps).
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
	// Nor through another package: the whole build of the root.
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, path := range strings.Fields(string(out)) {
		for _, banned := range []string{"go.opentelemetry.io/", "github.com/prometheus/"} {
			if strings.HasPrefix(path, banned) {
				t.Errorf("the root depends on %s", path)
			}
		}
	}
}
