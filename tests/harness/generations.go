package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Generation is a volume's content at one point: object -> version, and
// object path -> content.
type Generation struct {
	Versions map[string]string
	Contents map[string]string
}

// Generations is every generation of a volume's objects a test asked a
// provider for, in order, for checking what containers starting meanwhile
// see. It is safe for concurrent use.
type Generations struct {
	objects []string

	mu  sync.Mutex
	all []Generation
}

// NewGenerations returns the history of objects (paths, nested ones
// included), with no generation yet.
func NewGenerations(objects ...string) *Generations {
	return &Generations{objects: objects}
}

// Next adds the generation after the last one and returns it. The first
// has every object at version 1; after that an object change(name) says
// is unchanged keeps its version and content, a changed one gets the next
// version. content(name, version) is a changed object's content.
func (h *Generations) Next(change func(name string) bool, content func(name string, version int) string) Generation {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := Generation{Versions: map[string]string{}, Contents: map[string]string{}}
	for _, name := range h.objects {
		v := 1
		if n := len(h.all); n > 0 {
			prev := h.all[n-1]
			if !change(name) {
				g.Versions[name], g.Contents[name] = prev.Versions[name], prev.Contents[name]
				continue
			}
			v, _ = strconv.Atoi(prev.Versions[name]) // a number Next wrote
			v++
		}
		g.Versions[name] = strconv.Itoa(v)
		g.Contents[name] = content(name, v)
	}
	h.all = append(h.all, g)
	return g
}

// Len is how many generations were asked for.
func (h *Generations) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.all)
}

// since returns the generations from index i-2 on.
func (h *Generations) since(i int) []Generation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.all[max(0, i-2):])
}

// SeenFrom is a container's check (for InContainer) when at generations
// had been asked for as it started: target must show one of the generation
// mounted then, the one being written, or any later one by the time it
// reads (see Sees).
func (h *Generations) SeenFrom(at int) func(target string) error {
	return func(target string) error {
		return Sees(target, h.objects, func() []Generation { return h.since(at) })
	}
}

// StartContainers starts containers at target back to back until stop is
// closed, each checking SeenFrom the generations asked for as it started,
// counts them in started and returns the first wrong sight.
func (h *Generations) StartContainers(target string, stop <-chan struct{}, started *atomic.Int64) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := InContainer(target, h.SeenFrom(h.Len())); err != nil {
			return fmt.Errorf("container %d: %w", started.Load()+1, err)
		}
		started.Add(1)
	}
}

// Sees fails unless target shows the volume of objects: a read-only tmpfs
// that refuses writes, whose ..data generation holds exactly the files of
// one of allowed, every object's top-level name linked; never a scratch
// area.
func Sees(target string, objects []string, allowed func() []Generation) error {
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return err
	}
	if st.Type != unix.TMPFS_MAGIC || st.Flags&unix.ST_RDONLY == 0 {
		return fmt.Errorf("the target is not a read-only tmpfs (type %#x, flags %#x)", st.Type, st.Flags)
	}
	switch err := os.WriteFile(filepath.Join(target, "planted"), nil, 0o600); {
	case err == nil:
		return errors.New("writing into the target succeeded, want EROFS")
	case !errors.Is(err, unix.EROFS):
		return fmt.Errorf("writing into the target: %w, want EROFS", err)
	}
	gen, err := os.Readlink(filepath.Join(target, "..data"))
	if err != nil {
		return fmt.Errorf("the target holds no ..data (a scratch area, not the volume): %w", err)
	}
	got, err := readTree(filepath.Join(target, gen))
	if err != nil {
		return fmt.Errorf("read generation %s: %w", gen, err)
	}
	for _, name := range objects {
		top, _, _ := strings.Cut(name, "/")
		if _, err := os.Lstat(filepath.Join(target, top)); err != nil {
			return fmt.Errorf("name %s of generation %s: %w", top, gen, err)
		}
	}
	for _, g := range allowed() {
		if maps.Equal(got, g.Contents) {
			return nil
		}
	}
	return fmt.Errorf("generation %s holds %d files that are neither the old nor the new generation", gen, len(got))
}

// readTree reads every file below dir: path relative to dir -> content.
// It reads through an os.Root, so nothing outside dir is followed.
func readTree(dir string) (map[string]string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	fsys := root.FS()
	got := map[string]string{}
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		got[p] = string(b)
		return err
	})
	return got, err
}
