package store

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/provider/aws/spec"
)

func smItems(names ...string) []item {
	out := make([]item, len(names))
	for i, n := range names {
		out[i] = item{typ: spec.SecretsManager, region: "us-east-1", name: n}
	}
	return out
}

// TestListPrefixes: at most 10 prefixes, covering every name, as long as
// the names allow.
func TestListPrefixes(t *testing.T) {
	var bench []string
	for i := range 100 {
		bench = append(bench, fmt.Sprintf("bench/obj-%02d", i))
	}
	tests := []struct {
		name  string
		names []string
		want  []string
	}{
		{"few names are their own prefixes", []string{"b", "a/x", "a/y"}, []string{"a/x", "a/y", "b"}},
		{"a name covering another", []string{"app", "app-db", "web"}, []string{"app", "web"}},
		{"the benchmark's 100 objects", bench, []string{
			"bench/obj-0", "bench/obj-1", "bench/obj-2", "bench/obj-3", "bench/obj-4",
			"bench/obj-5", "bench/obj-6", "bench/obj-7", "bench/obj-8", "bench/obj-9",
		}},
		{"ARNs by their name part", []string{
			"arn:aws:secretsmanager:us-east-1:123456789012:secret:team/db-AbCdEf",
			"arn:aws:secretsmanager:us-east-1:123456789012:secret:x", "plain",
		}, []string{"plain", "team/db", "x"}},
		{"nothing in common", []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, listPrefixes(smItems(tt.names...))); diff != "" {
				t.Errorf("listPrefixes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestListPrefixesCover: for random name sets, at most 10 prefixes, each
// item's name (or an ARN's name part) starting with one.
func TestListPrefixesCover(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab/-_0"
	for range 500 {
		names := make([]string, 1+rng.IntN(60))
		for i := range names {
			var b strings.Builder
			for range 1 + rng.IntN(8) {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			}
			names[i] = b.String()
		}
		got := listPrefixes(smItems(names...))
		if len(got) == 0 || len(got) > listFilterValues {
			t.Fatalf("listPrefixes(%q) = %q: %d values", names, got, len(got))
		}
		for _, n := range names {
			if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(n, p) }) {
				t.Fatalf("listPrefixes(%q) = %q: nothing covers %q", names, got, n)
			}
		}
	}
}
