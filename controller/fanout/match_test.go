package fanout

import (
	"regexp"
	"testing"
)

func TestNamespaceSetPatterns(t *testing.T) {
	for _, tc := range []struct {
		list string
		in   []string
		out  []string
	}{
		// reflector's README example.
		{"namespace-1,namespace-2,namespace-[0-9]*", []string{"namespace-1", "namespace-2", "namespace-33", "namespace-"}, []string{"namespace-1a", "my-namespace-1", "namespace"}},
		// the whole name: a pattern is not a substring search.
		{"team-.*", []string{"team-a", "team-"}, []string{"my-team-a", "team"}},
		// items trimmed, blanks dropped.
		{" team-a , ,team-b ", []string{"team-a", "team-b"}, []string{" team-a", "team-c"}},
		// the leftmost match must span the name (reflector's .NET test),
		// so an alternation's first branch wins.
		{"a|ab", []string{"a"}, []string{"ab"}},
		{"ab|a", []string{"a", "ab"}, []string{"b"}},
		// a set list without items matches nothing, as in reflector.
		{" , ", nil, []string{"default", "a"}},
		// anchors written by the user still work.
		{"^prod-[a-z]+$", []string{"prod-eu"}, []string{"prod-1"}},
	} {
		s, err := ParseNamespaceSet(tc.list, "")
		if err != nil {
			t.Fatalf("%q: %v", tc.list, err)
		}
		for _, ns := range tc.in {
			if !s.Matches(ns, nil) {
				t.Errorf("%q does not match %q, want a match", tc.list, ns)
			}
		}
		for _, ns := range tc.out {
			if s.Matches(ns, nil) {
				t.Errorf("%q matches %q, want none", tc.list, ns)
			}
		}
	}
}

func TestNamespaceSetEmptyHoldsAll(t *testing.T) {
	var zero NamespaceSet
	s, err := ParseNamespaceSet("", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []NamespaceSet{zero, s} {
		if !set.Empty() || !set.Matches("anything", nil) {
			t.Errorf("an empty set does not hold every namespace")
		}
	}
}

func TestNamespaceSetSelector(t *testing.T) {
	prod := map[string]string{"env": "prod", "team": "a"}
	dev := map[string]string{"env": "dev"}
	for _, tc := range []struct {
		list, selector string
		name           string
		labels         map[string]string
		want           bool
	}{
		{"", "env=prod", "x", prod, true},
		{"", "env=prod", "x", dev, false},
		{"", "env in (prod,staging),team", "x", prod, true},
		{"", "!team", "x", dev, true},
		{"", "env!=prod", "x", prod, false},
		// patterns OR selector.
		{"x", "env=prod", "x", dev, true},
		{"y", "env=prod", "x", prod, true},
		{"y", "env=prod", "x", dev, false},
		// a blank selector is set, and matches every namespace.
		{"y", " ", "x", nil, true},
	} {
		s, err := ParseNamespaceSet(tc.list, tc.selector)
		if err != nil {
			t.Fatalf("%q %q: %v", tc.list, tc.selector, err)
		}
		if got := s.Matches(tc.name, tc.labels); got != tc.want {
			t.Errorf("list %q selector %q on %s %v: %v, want %v", tc.list, tc.selector, tc.name, tc.labels, got, tc.want)
		}
	}
}

// TestNamespaceSetWithSelectors: selectors OR-ed with each other, with
// reflector's own selector and with the names; a list set but empty
// selects nothing, an invalid item nothing while the rest still select.
func TestNamespaceSetWithSelectors(t *testing.T) {
	prod := map[string]string{"env": "prod", "team": "a"}
	dev := map[string]string{"env": "dev", "team": "b"}
	for _, tc := range []struct {
		list, selector, more string
		name                 string
		labels               map[string]string
		want                 bool
	}{
		{"", "", "env=prod;team=b", "x", prod, true},
		{"", "", "env=prod;team=b", "x", dev, true},
		{"", "", "env=prod ; team in (c,d)", "x", dev, false},
		{"", "team=b", "env=prod", "x", dev, true},
		{"x", "", "env=prod", "x", dev, true},
		{"y", "", "env=prod", "x", dev, false},
		// set but empty: selects nothing (the set is not empty).
		{"", "", " ; ", "x", prod, false},
		// both requirements of one selector must hold.
		{"", "", "env=prod,team=b", "x", prod, false},
	} {
		s, err := ParseNamespaceSet(tc.list, tc.selector)
		if err == nil {
			s, err = s.WithSelectors(tc.more)
		}
		if err != nil {
			t.Fatalf("%q %q %q: %v", tc.list, tc.selector, tc.more, err)
		}
		if got := s.Matches(tc.name, tc.labels); got != tc.want {
			t.Errorf("list %q selector %q selectors %q on %s %v: %v, want %v", tc.list, tc.selector, tc.more, tc.name, tc.labels, got, tc.want)
		}
	}
	s, err := NamespaceSet{}.WithSelectors("env in (;team=b")
	if err == nil || !regexp.MustCompile(regexp.QuoteMeta(`"env in ("`)).MatchString(err.Error()) {
		t.Errorf("error %v does not name the unparsable selector", err)
	}
	if s.Matches("x", prod) || !s.Matches("x", dev) {
		t.Error("an unparsable selector matched, or the valid one beside it did not")
	}
}

// TestNamespaceSetInvalidFailsClosed: what does not parse matches nothing,
// is named in the error, and the rest still matches.
func TestNamespaceSetInvalidFailsClosed(t *testing.T) {
	s, err := ParseNamespaceSet("team-(,ok", "env in (")
	if err == nil {
		t.Fatal("no error for an unparsable pattern and selector")
	}
	for _, want := range []string{`"team-("`, `"env in ("`} {
		if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(err.Error()) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if s.Matches("team-(", map[string]string{"env": ""}) {
		t.Error("an unparsable pattern or selector matched")
	}
	if !s.Matches("ok", nil) {
		t.Error("the valid pattern beside an invalid one does not match")
	}
	only, _ := ParseNamespaceSet("(?=x)", "")
	if only.Matches("x", nil) || only.Empty() {
		t.Error("a list of one invalid pattern holds namespaces, want none")
	}
}

func TestWholeMatch(t *testing.T) {
	re := regexp.MustCompile("b+")
	for s, want := range map[string]bool{"bbb": true, "abbb": false, "bbba": false, "": false} {
		if got := WholeMatch(re, s); got != want {
			t.Errorf("WholeMatch(b+, %q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzParseNamespaceSet(f *testing.F) {
	f.Add("namespace-[0-9]*,team-a", "env=prod", "namespace-7")
	f.Add("(", "a in (", "x")
	f.Fuzz(func(t *testing.T, list, selector, name string) {
		s, _ := ParseNamespaceSet(list, selector)
		_ = s.Matches(name, map[string]string{"env": "prod"})
	})
}
