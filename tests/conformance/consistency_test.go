package conformance_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keymount/keymount/tests/harness"
)

// The consistency proof publishes a volume, then republishes it many times
// with new content through the CSI socket while readers read it with the
// consistent-read recipe of internal/atomicwrite (doc.go).
const (
	republishes = 1000
	readers     = 2
)

// consistencyFiles are the volume's files: top-level, nested, and one with
// its own mode.
var consistencyFiles = []string{"token", "db/password", "config.json", "tls/ca.crt"}

const consistencyObjects = `- objectName: token
- objectName: db/password
- objectName: config.json
  filePermission: "0600"
- objectName: ca.crt
  objectAlias: tls/ca.crt
`

// consistencyContents is file name's contents in round i: the round, the
// name, and a round-dependent length, so a torn or mixed read shows.
func consistencyContents(i int, name string) string {
	return fmt.Sprintf("%d:%s:%s", i, name, strings.Repeat("x", (i*37)%900))
}

// TestReadersNeverSeeMixedGenerations proves the atomic refresh end to end:
// whatever the driver does while republishing, a reader following the
// recipe gets every file, all from one round, intact; rounds never go back.
func TestReadersNeverSeeMixedGenerations(t *testing.T) {
	h := harness.Start(t, harness.Options{})
	h.WriteClass("rotating", consistencyObjects)
	writeRound := func(i int) {
		for _, name := range consistencyFiles {
			object := name
			if name == "tls/ca.crt" {
				object = "ca.crt"
			}
			h.WriteObject(object, consistencyContents(i, name))
		}
	}
	v := h.NewVolume("secrets")
	writeRound(0)
	publish(t, h, v, "rotating")

	stop := make(chan struct{})
	results := make([]readerResult, readers)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() { results[r] = readLoop(v.Target, stop) })
	}
	for i := 1; i <= republishes; i++ {
		writeRound(i)
		if err := h.Publish(t.Context(), v, "rotating", true); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("republish %d: %v", i, err)
		}
	}
	close(stop)
	wg.Wait()

	for r, res := range results {
		t.Logf("reader %d: %d consistent reads of %d generations, %d retries", r, res.consistent, len(res.rounds), res.retries)
		for _, p := range res.problems {
			t.Errorf("reader %d: %s", r, p)
		}
		if res.consistent == 0 || len(res.rounds) < 2 {
			t.Errorf("reader %d saw %d generations in %d consistent reads: it did not race the writer", r, len(res.rounds), res.consistent)
		}
	}
	// Every republish changed the content, and the last one is what the pod sees.
	if rec := mustRecord(t, h, v); rec.Generation != republishes+1 || rec.LastError != "" {
		t.Errorf("record: generation %d lastError %q, want %d and no error", rec.Generation, rec.LastError, republishes+1)
	}
	want := map[string]file{}
	for _, name := range consistencyFiles {
		mode := os.FileMode(0o644)
		if name == "config.json" {
			mode = 0o600
		}
		want[name] = file{consistencyContents(republishes, name), mode}
	}
	assertFiles(t, v.Target, want)
}

// readerResult is what one reader observed.
type readerResult struct {
	consistent int            // reads where ..data did not move
	retries    int            // reads started over because ..data moved
	rounds     map[string]int // generation -> round read from it
	problems   []string       // violations, at most maxProblems
}

const maxProblems = 10

// readPause spaces a reader's reads a little, so that on a small machine it
// does not starve the driver of CPU; it still reads every generation many
// times.
const readPause = 10 * time.Microsecond

func (r *readerResult) problem(format string, args ...any) {
	if len(r.problems) < maxProblems {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

// readLoop reads the volume with the consistent-read recipe until stop is
// closed: read ..data, read every file by its normal path, read ..data
// again; if it moved, start over, else every file must be there, intact and
// from one round.
func readLoop(target string, stop <-chan struct{}) readerResult {
	res := readerResult{rounds: map[string]int{}}
	last := -1
	for {
		select {
		case <-stop:
			return res
		case <-time.After(readPause):
		}
		g1, err := os.Readlink(filepath.Join(target, "..data"))
		if err != nil {
			res.problem("..data unreadable: %v", err)
			continue
		}
		contents := make(map[string]string, len(consistencyFiles))
		var readErrs []string
		for _, name := range consistencyFiles {
			b, err := os.ReadFile(filepath.Join(target, name))
			if err != nil {
				readErrs = append(readErrs, err.Error())
				continue
			}
			contents[name] = string(b)
		}
		g2, err := os.Readlink(filepath.Join(target, "..data"))
		if err != nil {
			res.problem("..data unreadable: %v", err)
			continue
		}
		if g1 != g2 {
			res.retries++
			continue
		}
		res.consistent++
		if len(readErrs) > 0 {
			res.problem("generation %s: missing files: %s", g1, strings.Join(readErrs, "; "))
			continue
		}
		round, ok := checkRound(&res, g1, contents)
		if !ok {
			continue
		}
		if round < last {
			res.problem("generation %s holds round %d after round %d was read: went back in time", g1, round, last)
		}
		last = round
		if prev, seen := res.rounds[g1]; seen && prev != round {
			res.problem("generation %s held round %d, now round %d: a generation changed", g1, prev, round)
		}
		res.rounds[g1] = round
	}
}

// checkRound returns the round all contents belong to, recording a problem
// when they do not agree or a file is torn.
func checkRound(res *readerResult, gen string, contents map[string]string) (int, bool) {
	first := contents[consistencyFiles[0]]
	round, err := strconv.Atoi(strings.SplitN(first, ":", 2)[0])
	if err != nil {
		res.problem("generation %s: %s has no round: %.40q", gen, consistencyFiles[0], first)
		return 0, false
	}
	for _, name := range consistencyFiles {
		if got := contents[name]; got != consistencyContents(round, name) {
			res.problem("generation %s mixes rounds or is torn: %s is %.40q..., want round %d", gen, name, got, round)
			return 0, false
		}
	}
	return round, true
}
