package ignoredflags_test

import (
	"bytes"
	"flag"
	"maps"
	"strings"
	"testing"

	"github.com/keymount/keymount/internal/ignoredflags"
)

var flags = map[string]ignoredflags.Flag{
	"metrics-addr":  {Usage: "u", Why: "w"},
	"enable-thing":  {Usage: "u", Why: "w", Bool: true},
	"never-given-x": {Usage: "u", Why: "w"},
}

func TestRegisterRecordsGivenFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	s := ignoredflags.Register(fs, flags)
	if err := fs.Parse([]string{"--metrics-addr=:8095", "--enable-thing"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"metrics-addr": ":8095", "enable-thing": "true"}
	if got := s.Given(); !maps.Equal(got, want) {
		t.Errorf("given = %v, want %v", got, want)
	}
	if u := fs.Lookup("enable-thing").Usage; !strings.Contains(u, "accepted and ignored: w") {
		t.Errorf("usage %q does not say the flag is ignored and why", u)
	}
}

func TestBoolFlagRejectsNonBool(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	ignoredflags.Register(fs, flags)
	if err := fs.Parse([]string{"--enable-thing=maybe"}); err == nil {
		t.Error("--enable-thing=maybe parsed")
	}
}
