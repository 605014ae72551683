package hostile_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/harness"
)

// traversalCases are provider file lists a volume must never get: names
// that leave the volume, names of the writer's own entries ("..data", a
// generation directory), names that are not one file each. Every case is
// sent beside a harmless file, so the whole list must be refused.
var traversalCases = []struct {
	name  string
	paths []string
}{
	{"parent", []string{"../x"}},
	{"absolute", []string{"/etc/x"}},
	{"parent-inside", []string{"a/../../x"}},
	{"parent-deep", []string{"a/b/../../../../x"}},
	{"data-link", []string{"..data"}},
	{"inside-data-link", []string{"..data/x"}},
	{"generation", []string{"..2026_11_23_03_10_34.000000000.123456"}},
	{"inside-generation", []string{"..2026_11_23_03_10_34.000000000.123456/x"}},
	{"temporary-link", []string{"..data_tmp"}},
	{"empty", []string{""}},
	{"dot", []string{"."}},
	{"dot-slash", []string{"./x"}},
	{"trailing-slash", []string{"x/"}},
	{"double-slash", []string{"a//x"}},
	{"nul", []string{"x\x00y"}},
	{"backslash", []string{`..\x`}},
	{"duplicate", []string{"dup", "dup"}},
	{"file-and-directory", []string{"a", "a/b"}},
	{"directory-and-file", []string{"a/b/c", "a/b"}},
}

// TestCVE2020_8567ProviderPathTraversal guards the class of CVE-2020-8567:
// a provider's file names must never lead the driver to write outside the
// volume. On a first publish every hostile list fails, writes nothing
// anywhere and leaves no mount; on a republish the call succeeds (kubelet
// removes the mount directory of a failing republish) and the pod keeps the
// files it had.
func TestCVE2020_8567ProviderPathTraversal(t *testing.T) {
	for _, tc := range traversalCases {
		t.Run(tc.name+"/first-publish", func(t *testing.T) {
			n := startNode(t, harness.Options{})
			marker := newMarker(t)
			outside := outsidePaths(t, tc.paths)
			n.prov.set(answer(hostileFiles(tc.paths, marker)...))
			v := n.NewVolume("secrets")

			err := n.publish(t, v)
			assertRefused(t, err, tc.paths)
			assertNotPublished(t, n.Harness, v)
			assertStateEmpty(t, n.Harness)
			assertNoMarker(t, n.Harness, marker, outside)
		})
		t.Run(tc.name+"/republish", func(t *testing.T) {
			n := startNode(t, harness.Options{})
			marker := newMarker(t)
			outside := outsidePaths(t, tc.paths)
			old := map[string]string{"ok": "v1", "dir/ok": "v1"}
			n.prov.set(answer(filesOf(old)...))
			v := n.NewVolume("secrets")
			n.mustPublish(t, v)
			gen, _ := generationOf(t, v.Target)

			n.prov.set(answer(hostileFiles(tc.paths, marker)...))
			if err := n.publish(t, v); err != nil {
				t.Fatalf("republish with hostile names: %v, want OK (the old files stay)", err)
			}
			if got, _ := generationOf(t, v.Target); got != gen {
				t.Errorf("..data -> %s after a refused refresh, want the old generation %s", got, gen)
			}
			assertShows(t, v.Target, old)
			assertNoMarker(t, n.Harness, marker, outside)
			rec, err := n.Record(v.ID)
			if err != nil || rec == nil || rec.LastError == "" {
				t.Errorf("record after a refused refresh: %+v (%v), want the failure in lastError", rec, err)
			}
			n.mustUnpublish(t, v)
			assertNotPublished(t, n.Harness, v)
		})
	}
}

// hostileFiles is a harmless file "ok" followed by a file for every path,
// each holding the marker.
func hostileFiles(paths []string, marker string) []*v1alpha1.File {
	files := []*v1alpha1.File{fileOf("ok", "v2")}
	for _, p := range paths {
		files = append(files, fileOf(p, marker))
	}
	return files
}

// newMarker is contents no file on the node holds by chance.
func newMarker(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "HOSTILE-" + hex.EncodeToString(b[:])
}

// outsidePaths are the places outside the harness directory a traversal
// name could reach: an absolute name itself and the name taken from the
// test's working directory. Each must not exist yet, so that the test can
// tell whether the driver made it.
func outsidePaths(t *testing.T, paths []string) []string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		if p == "" || strings.ContainsRune(p, 0) {
			continue
		}
		for _, c := range []string{p, filepath.Join(wd, p)} {
			if !filepath.IsAbs(c) || c == "/" {
				continue
			}
			if _, err := os.Lstat(c); err == nil {
				continue // there before the test: the marker check covers it
			}
			out = append(out, filepath.Clean(c))
		}
	}
	return out
}

// assertRefused checks that a first publish with a hostile file list
// failed with a code that tells kubelet the call is over (not one of the
// "may still be in progress" codes, never Unknown) and names a bad path.
func assertRefused(t *testing.T, err error, paths []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("publish with provider files %q succeeded, want it refused", paths)
	}
	st := status.Convert(err)
	if st.Code() != codes.Internal && st.Code() != codes.InvalidArgument {
		t.Errorf("publish with provider files %q: code %v (%s), want Internal or InvalidArgument", paths, st.Code(), st.Message())
	}
	for _, p := range paths {
		if strings.Contains(st.Message(), strconv.Quote(p)) {
			return
		}
	}
	t.Errorf("message %q names none of the refused paths %q", st.Message(), paths)
}

// assertNoMarker checks that no file below the harness directory holds the
// marker and that none of the outside paths was created.
func assertNoMarker(t *testing.T, h *harness.Harness, marker string, outside []string) {
	t.Helper()
	for _, p := range filesWithMarker(t, h.Dir, []byte(marker)) {
		t.Errorf("hostile provider content written to %s", p)
	}
	for _, p := range outside {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was created outside the volume (lstat: %v)", p, err)
			_ = os.Remove(p)
		}
	}
}
