package fanout

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// NamespaceSet is a set of namespaces given as reflector gives it: a comma
// list of names or regular expressions, and a label selector (keymount
// adds more selectors, OR-ed: WithSelectors). A namespace is in the set
// when a pattern matches its whole name or a selector matches its labels;
// every namespace is when both are empty. The zero value holds every
// namespace.
type NamespaceSet struct {
	patterns    []*regexp.Regexp
	selectors   []labels.Selector
	hasPatterns bool
	hasSelector bool
}

// SelectorSeparator separates the label selectors of a WithSelectors
// list: a character no label selector holds (selectors use commas).
const SelectorSeparator = ";"

// ParseNamespaceSet parses a pattern list and a label selector. Items
// split on commas, blank ones dropped, each trimmed. A pattern matches a
// name as reflector's does: the leftmost match must span the whole name
// ("team-.*" holds "team-a", not "my-team-a"; a plain name holds itself).
// Go's regexp syntax is RE2's: a pattern that does not compile (a .NET
// look-around, say) matches nothing, and so does a selector that does not
// parse — the set fails closed, as reflector's selectors do — and the
// error names each; the rest of the set still holds.
func ParseNamespaceSet(list, selector string) (NamespaceSet, error) {
	// As in reflector, a list or selector that is set counts even when it
	// holds nothing: " , " matches no name (and a blank selector every
	// namespace).
	s := NamespaceSet{hasPatterns: list != "", hasSelector: selector != ""}
	var errs []error
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		re, err := regexp.Compile(item)
		if err != nil {
			errs = append(errs, fmt.Errorf("namespace pattern %q: %w", item, err))
			continue
		}
		s.patterns = append(s.patterns, re)
	}
	switch {
	case selector == "":
	case strings.TrimSpace(selector) == "":
		s.selectors = append(s.selectors, labels.Everything())
	default:
		sel, err := labels.Parse(selector)
		if err != nil {
			errs = append(errs, fmt.Errorf("namespace selector %q: %w", selector, err))
		} else {
			s.selectors = append(s.selectors, sel)
		}
	}
	return s, errors.Join(errs...)
}

// WithSelectors returns s with the label selectors of list (separated by
// SelectorSeparator, each trimmed, blank ones dropped) OR-ed to its own:
// a namespace any of them selects is in the set (External Secrets'
// ClusterExternalSecret namespaceSelectors). A list that is set counts
// even when it holds nothing (no namespace is selected by it); a selector
// that does not parse selects nothing, and the error names it.
func (s NamespaceSet) WithSelectors(list string) (NamespaceSet, error) {
	if list == "" {
		return s, nil
	}
	s.hasSelector = true
	s.selectors = slices.Clone(s.selectors)
	var errs []error
	for _, item := range strings.Split(list, SelectorSeparator) {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		sel, err := labels.Parse(item)
		if err != nil {
			errs = append(errs, fmt.Errorf("namespace selector %q: %w", item, err))
			continue
		}
		s.selectors = append(s.selectors, sel)
	}
	return s, errors.Join(errs...)
}

// Empty reports whether the set was given neither patterns nor a selector
// (and so holds every namespace).
func (s NamespaceSet) Empty() bool { return !s.hasPatterns && !s.hasSelector }

// Matches reports whether the namespace name, with its labels, is in s.
func (s NamespaceSet) Matches(name string, nsLabels map[string]string) bool {
	if s.Empty() {
		return true
	}
	if s.MatchesName(name) {
		return true
	}
	for _, sel := range s.selectors {
		if sel.Matches(labels.Set(nsLabels)) {
			return true
		}
	}
	return false
}

// MatchesName reports whether a pattern of s matches the whole name.
func (s NamespaceSet) MatchesName(name string) bool {
	for _, re := range s.patterns {
		if WholeMatch(re, name) {
			return true
		}
	}
	return false
}

// WholeMatch reports whether the leftmost match of re in s spans all of s:
// reflector's test (a .NET Regex.Match whose value is as long as the
// input). It differs from an anchored ^(?:re)$ where an alternation's first
// branch matches a prefix: "a|ab" does not match "ab", as in reflector.
func WholeMatch(re *regexp.Regexp, s string) bool {
	loc := re.FindStringIndex(s)
	return len(loc) == 2 && loc[0] == 0 && loc[1] == len(s)
}
