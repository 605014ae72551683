package atomicwrite

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Repair makes dir consistent again after a writer was killed: every
// top-level name of the generation ..data names is linked, links of names
// that generation does not hold (a generation linked but never swapped in,
// or names removed by a swap) and temporary links are removed, and
// generations retired more than retireGrace ago are deleted, as the next
// Write would do. A dir without ..data keeps no link into it. Nothing the
// writer did not make is touched; the files themselves are never changed,
// so a reader sees the same content before and after. It takes the lock
// Write takes.
func Repair(dir string) error {
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	gen, err := currentGeneration(dir)
	if err != nil {
		return err
	}
	var names []string
	if gen != "" {
		entries, err := os.ReadDir(filepath.Join(dir, gen))
		if err != nil {
			return fmt.Errorf("repair %s: read generation %q: %w", dir, gen, err)
		}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		slices.Sort(names)
		if _, err := linkNames(dir, names); err != nil {
			return fmt.Errorf("repair %s: %w", dir, err)
		}
	}
	return cleanup(dir, names, keepGenerations(gen, gen, time.Now()))
}
