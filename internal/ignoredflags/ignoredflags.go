// Package ignoredflags accepts command-line flags of the programs keymount
// replaces (the upstream driver, the existing AWS provider) that keymount
// does not need, so that their manifests start unchanged, and logs each one
// given once.
package ignoredflags

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"k8s.io/klog/v2"
)

// Flag is an accepted and ignored flag.
type Flag struct {
	// Usage says what the flag meant where it comes from.
	Usage string
	// Why says why keymount ignores it.
	Why string
	// Bool flags may be given without a value, and only with true or false.
	Bool bool
}

// Set is the ignored flags registered on a flag set.
type Set struct {
	flags map[string]Flag
	given map[string]string
}

// Register defines every flag of flags on fs.
func Register(fs *flag.FlagSet, flags map[string]Flag) *Set {
	s := &Set{flags: flags, given: map[string]string{}}
	for name, f := range flags {
		record := func(v string) { s.given[name] = v }
		usage := f.Usage + " (accepted and ignored: " + f.Why + ")"
		if f.Bool {
			fs.Var(boolFunc(record), name, usage)
			continue
		}
		fs.Func(name, usage, func(v string) error {
			record(v)
			return nil
		})
	}
	return s
}

// Given returns the ignored flags the command line gave, with their values.
func (s *Set) Given() map[string]string { return maps.Clone(s.given) }

// Log logs each ignored flag the command line gave, once, in name order.
func (s *Set) Log() {
	for _, name := range slices.Sorted(maps.Keys(s.given)) {
		klog.InfoS("ignoring a flag keymount does not need", "flag", "--"+name, "value", s.given[name], "why", s.flags[name].Why)
	}
}

// boolFunc is a flag.Value that takes an optional value, like a bool flag.
type boolFunc func(string)

func (f boolFunc) String() string { return "" }

func (f boolFunc) Set(v string) error {
	if _, err := strconv.ParseBool(v); err != nil {
		return fmt.Errorf("want true or false: %w", err)
	}
	f(v)
	return nil
}

func (f boolFunc) IsBoolFlag() bool { return true }
