package lint_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/keymount/keymount"

// wings are what each binary must not link: keymount-controller no node
// code (driver/, cluster/, the CSI spec, mount-utils), the node plugin
// nothing of keymount-controller's wing (controller/). The depguard rules
// keep the imports of each folder; this keeps the binaries themselves, so
// that an import that passes through an allowed folder still fails.
var wings = []struct {
	binary    string
	forbidden []string // import path prefixes
}{
	{"./cmd/keymount-controller", []string{
		module + "/driver", module + "/cluster",
		"github.com/container-storage-interface/spec", "k8s.io/mount-utils",
	}},
	{"./cmd/keymount-driver", []string{module + "/controller"}},
}

// TestBinaryWings: `go list -deps` of each binary holds nothing of the
// other's wing.
func TestBinaryWings(t *testing.T) {
	root := moduleRoot(t)
	for _, w := range wings {
		t.Run(strings.TrimPrefix(w.binary, "./cmd/"), func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", w.binary)
			cmd.Dir = root
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", w.binary, err)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 10 {
				t.Fatalf("go list -deps %s listed %d packages: %q", w.binary, len(deps), deps)
			}
			for _, d := range deps {
				for _, f := range w.forbidden {
					if d == f || strings.HasPrefix(d, f+"/") {
						t.Errorf("%s links %s (%s is not its wing): find the import with `go list -deps -f '{{.ImportPath}}: {{.Imports}}' %s`",
							w.binary, d, f, w.binary)
					}
				}
			}
		})
	}
}
