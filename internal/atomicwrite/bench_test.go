package atomicwrite_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/keymount/keymount/internal/atomicwrite"
)

func benchFiles(n int) []atomicwrite.File {
	files := make([]atomicwrite.File, n)
	for i := range files {
		files[i] = atomicwrite.File{Path: fmt.Sprintf("dir%d/file%d", i%5, i), Contents: bytes.Repeat([]byte{'s'}, 4096)}
	}
	return files
}

func BenchmarkWrite(b *testing.B) {
	for _, n := range []int{1, 50} {
		b.Run(fmt.Sprintf("files=%d/changed", n), func(b *testing.B) {
			dir := b.TempDir()
			files := benchFiles(n)
			b.ReportAllocs()
			var round byte
			for b.Loop() {
				round++
				files[0].Contents[0] = round // differ from the previous round
				if changed, err := atomicwrite.Write(dir, files); err != nil || !changed {
					b.Fatalf("Write = %v, %v", changed, err)
				}
			}
		})
		b.Run(fmt.Sprintf("files=%d/unchanged", n), func(b *testing.B) {
			dir := b.TempDir()
			files := benchFiles(n)
			mustWrite(b, dir, files)
			b.ReportAllocs()
			for b.Loop() {
				if changed, err := atomicwrite.Write(dir, files); err != nil || changed {
					b.Fatalf("Write = %v, %v", changed, err)
				}
			}
		})
	}
}
