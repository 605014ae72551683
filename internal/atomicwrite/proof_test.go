package atomicwrite_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/keymount/keymount/internal/atomicwrite"
)

const proofWrites = 1000

// proofReaders is 2 to 4 reader goroutines, one per CPU.
var proofReaders = min(4, max(2, runtime.NumCPU()))

// proofPaths are the files of every generation of the proof, some nested.
var proofPaths = []string{
	"a", "b", "c",
	"conf/api", "conf/db/password", "conf/db/user",
	"tls/cert.pem", "tls/key.pem",
}

// proofContents is "gen=N\nfile=P\n" plus padding whose length varies with
// N, followed by "sum=" and the SHA-256 of everything before it, so a torn or
// mixed file is detected.
func proofContents(gen int, p string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "gen=%d\nfile=%s\n", gen, p)
	b.Write(bytes.Repeat([]byte{byte('a' + gen%26)}, (gen*97)%1024))
	sum := sha256.Sum256(b.Bytes())
	b.WriteString("\nsum=" + hex.EncodeToString(sum[:]))
	return b.Bytes()
}

// parseProof checks the checksum and file marker and returns the generation number.
func parseProof(p string, data []byte) (int, error) {
	body, sum, ok := bytes.Cut(data, []byte("\nsum="))
	want := sha256.Sum256(body)
	if !ok || string(sum) != hex.EncodeToString(want[:]) {
		return 0, fmt.Errorf("%s: torn file (%d bytes, checksum mismatch)", p, len(data))
	}
	var gen int
	var name string
	if _, err := fmt.Sscanf(string(body), "gen=%d\nfile=%s\n", &gen, &name); err != nil || name != p {
		return 0, fmt.Errorf("%s: bad header (file=%q): %w", p, name, err)
	}
	return gen, nil
}

func proofFiles(gen int) []atomicwrite.File {
	files := make([]atomicwrite.File, len(proofPaths))
	for i, p := range proofPaths {
		files[i] = atomicwrite.File{Path: p, Mode: os.FileMode(0o600 + 0o040*(i%2)), Contents: proofContents(gen, p)}
	}
	return files
}

// readerStats is what one reader saw.
type readerStats struct {
	passes     int
	consistent int
	seen       map[string]int // generation dir -> generation number, from consistent passes
}

// readPass follows the consistent-read recipe of the package doc once. It
// returns g1, the generation of every file, and whether g1 == g2.
func readPass(dir string) (string, []int, bool, error) {
	g1, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		return "", nil, false, err
	}
	gens := make([]int, len(proofPaths))
	for i, p := range proofPaths {
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			return "", nil, false, err
		}
		if gens[i], err = parseProof(p, data); err != nil {
			return "", nil, false, err
		}
	}
	g2, err := os.Readlink(filepath.Join(dir, "..data"))
	return g1, gens, err == nil && g1 == g2, err
}

// reader loops until done is closed and records what it saw.
func reader(dir string, done <-chan struct{}) (readerStats, error) {
	st := readerStats{seen: make(map[string]int)}
	for {
		select {
		case <-done:
			return st, nil
		default:
		}
		g1, gens, same, err := readPass(dir)
		if err != nil {
			return st, fmt.Errorf("pass %d: %w", st.passes, err)
		}
		st.passes++
		if !same {
			continue
		}
		for i, g := range gens {
			if g != gens[0] {
				return st, fmt.Errorf("pass %d under %s: %s has generation %d, %s has %d", st.passes, g1, proofPaths[0], gens[0], proofPaths[i], g)
			}
		}
		if prev, ok := st.seen[g1]; ok && prev != gens[0] {
			return st, fmt.Errorf("%s held generation %d and later %d", g1, prev, gens[0])
		}
		st.seen[g1] = gens[0]
		st.consistent++
	}
}

// TestConsistentReads is the proof: readers following the recipe never see
// a missing, torn or mixed file while 1,000 Writes replace the content.
func TestConsistentReads(t *testing.T) {
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			v := newVolume(t, bk.tmpfs)
			written := map[string]int{}
			mustWrite(t, v.dir, proofFiles(0))
			written[currentGen(t, v.dir)] = 0

			done := make(chan struct{})
			stats := make([]readerStats, proofReaders)
			errs := make([]error, proofReaders)
			var wg sync.WaitGroup
			for i := range proofReaders {
				wg.Go(func() { stats[i], errs[i] = reader(v.dir, done) })
			}
			writeErr := writeProof(v.dir, written)
			close(done)
			wg.Wait()
			if writeErr != nil {
				t.Fatal(writeErr)
			}
			checkProof(t, stats, errs, written)
		})
	}
}

// writeProof writes generations 1..proofWrites and records which generation
// directory holds which number.
func writeProof(dir string, written map[string]int) error {
	for gen := 1; gen <= proofWrites; gen++ {
		changed, err := atomicwrite.Write(dir, proofFiles(gen))
		if err != nil || !changed {
			return fmt.Errorf("write %d: changed=%v, %w", gen, changed, err)
		}
		name, err := os.Readlink(filepath.Join(dir, "..data"))
		if err != nil {
			return err
		}
		written[name] = gen
	}
	return nil
}

func checkProof(t *testing.T, stats []readerStats, errs []error, written map[string]int) {
	t.Helper()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("reader: %v", err)
	}
	var passes, consistent int
	for i, st := range stats {
		for name, gen := range st.seen {
			if want, ok := written[name]; !ok || want != gen {
				t.Errorf("reader %d: %s held generation %d, writer put %s there", i, name, gen, strconv.Itoa(want))
			}
		}
		if st.passes == 0 {
			t.Errorf("reader %d made no pass", i)
		}
		passes += st.passes
		consistent += st.consistent
	}
	if consistent == 0 {
		t.Errorf("no consistent pass out of %d", passes)
	}
	t.Logf("%d writes, %d read passes, %d consistent", proofWrites, passes, consistent)
}
