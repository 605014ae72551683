package hostile_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/harness"
)

// manyFiles is n small files named f00000..., each holding its name and
// version; every file is a top-level name, the costliest layout.
func manyFiles(n int, version string) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		name := fmt.Sprintf("f%05d", i)
		m[name] = name + "@" + version
	}
	return m
}

// TestTenThousandFilesUnderDefaultSize: 10,000 small files publish and
// refresh twice under the default tmpfs size, every file readable through
// its link after each call, no refresh failing for lack of room.
func TestTenThousandFilesUnderDefaultSize(t *testing.T) {
	n := startNode(t, harness.Options{})
	v := n.NewVolume("secrets")
	for i, version := range []string{"v1", "v2", "v3"} {
		want := manyFiles(10000, version)
		n.prov.set(answer(filesOf(want)...))
		n.mustPublish(t, v)
		assertShows(t, v.Target, want)
		rec, err := n.Record(v.ID)
		if err != nil || rec == nil || rec.LastError != "" || rec.Generation != int64(i+1) {
			t.Fatalf("record after publish %d: %+v (%v), want generation %d without error", i+1, rec, err, i+1)
		}
	}
	n.mustUnpublish(t, v)
	assertNotPublished(t, n.Harness, v)
}

// onePageFiles is n files of one byte each: each takes a whole page of
// tmpfs, so n pages in all.
func onePageFiles(n int) []*v1alpha1.File {
	files := make([]*v1alpha1.File, n)
	for i := range files {
		files[i] = fileOf(fmt.Sprintf("p%04d", i), "x")
	}
	return files
}

// TestContentOverTmpfsSizeRefused: on a first publish, content larger than
// --tmpfs-size, counted as tmpfs counts it (every file rounded up to whole
// pages), is ResourceExhausted naming --tmpfs-size, and leaves no mount;
// content of exactly the size fits.
func TestContentOverTmpfsSizeRefused(t *testing.T) {
	const size = 1 << 20
	pages := size / os.Getpagesize()
	cases := []struct {
		name  string
		files []*v1alpha1.File
		fits  bool
	}{
		{"one-byte-over", []*v1alpha1.File{fileOf("big", strings.Repeat("b", size+1))}, false},
		{"page-rounded-over", onePageFiles(pages + 1), false},
		{"exactly-the-size", onePageFiles(pages), true},
		{"one-file-of-the-size", []*v1alpha1.File{fileOf("big", strings.Repeat("b", size))}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, harness.Options{TmpfsSize: size})
			n.prov.set(answer(tc.files...))
			v := n.NewVolume("secrets")
			err := n.publish(t, v)
			if tc.fits {
				if err != nil {
					t.Fatalf("content of exactly --tmpfs-size refused: %v", err)
				}
				n.mustUnpublish(t, v)
				return
			}
			assertCode(t, err, codes.ResourceExhausted, "--tmpfs-size")
			assertNotPublished(t, n.Harness, v)
			assertStateEmpty(t, n.Harness)
		})
	}
}

// TestSameSizeRefreshesInARow: a volume whose content is close to
// --tmpfs-size refreshes to new content of the same size many times in a
// row, faster than retired generations expire; none of the refreshes fails
// for lack of room.
func TestSameSizeRefreshesInARow(t *testing.T) {
	const size = 1 << 20
	n := startNode(t, harness.Options{TmpfsSize: size})
	v := n.NewVolume("secrets")
	page := os.Getpagesize()
	for i := range 30 {
		want := map[string]string{}
		for j := range size/page - 2 {
			want[fmt.Sprintf("dir/p%04d", j)] = fmt.Sprintf("%-*d", page, i)
		}
		n.prov.set(answer(filesOf(want)...))
		n.mustPublish(t, v)
		rec, err := n.Record(v.ID)
		if err != nil || rec == nil || rec.LastError != "" || rec.Generation != int64(i+1) {
			t.Fatalf("refresh %d: record %+v (%v), want generation %d without error", i+1, rec, err, i+1)
		}
		if got, err := os.ReadFile(filepath.Join(v.Target, "dir", "p0000")); err != nil || string(got) != want["dir/p0000"] {
			t.Fatalf("refresh %d: volume shows %.20q (%v)", i+1, got, err)
		}
	}
	n.mustUnpublish(t, v)
	assertNotPublished(t, n.Harness, v)
}
