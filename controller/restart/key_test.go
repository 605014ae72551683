package restart

import (
	secretsstorev1 "github.com/keymount/keymount/apis/v1"

	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestAnnotationKey(t *testing.T) {
	long := strings.Repeat("a", 56) // "rollout-" + 56 = 64 characters: one too many
	tests := []struct {
		name, class, want string
	}{
		{name: "short", class: "db", want: "keymount.io/rollout-db"},
		{name: "dots and dashes", class: "db.prod-eu", want: "keymount.io/rollout-db.prod-eu"},
		{name: "longest kept", class: strings.Repeat("a", 55), want: "keymount.io/rollout-" + strings.Repeat("a", 55)},
		// printf 'a%.0s' $(seq 56) | sha256sum | cut -c1-16
		{name: "one too long", class: long, want: "keymount.io/rollout-b35439a4ac6f0948"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := AnnotationKey(tc.class)
			if got != tc.want {
				t.Errorf("AnnotationKey(%q) = %q, want %q", tc.class, got, tc.want)
			}
			if errs := validation.IsQualifiedName(got); len(errs) > 0 {
				t.Errorf("%q is no valid annotation key: %v", got, errs)
			}
		})
	}
	if a, b := AnnotationKey(long), AnnotationKey(long+"b"); a == b {
		t.Errorf("two long class names share the key %q", a)
	}
	// The longest class name there can be (a DNS subdomain: 253).
	got := AnnotationKey(strings.Repeat("x.", 126) + "x")
	if errs := validation.IsQualifiedName(got); len(errs) > 0 {
		t.Errorf("%q is no valid annotation key: %v", got, errs)
	}
}

func TestAnnotationValue(t *testing.T) {
	objs := []secretsstorev1.SecretProviderClassObject{{ID: "db/password", Version: "3"}, {ID: "db/user", Version: "1"}}
	reversed := []secretsstorev1.SecretProviderClassObject{objs[1], objs[0]}
	v := AnnotationValue(objs)
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(v) {
		t.Fatalf("AnnotationValue = %q, want 32 hex digits", v)
	}
	if got := AnnotationValue(reversed); got != v {
		t.Errorf("the order of the objects changed the value: %q, %q", v, got)
	}
	if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
		t.Errorf("%q: %v", v, errs) // short and plain, whatever annotations allow
	}
	different := map[string][]secretsstorev1.SecretProviderClassObject{
		"a new version":  {{ID: "db/password", Version: "4"}, {ID: "db/user", Version: "1"}},
		"an object more": {{ID: "db/password", Version: "3"}, {ID: "db/user", Version: "1"}, {ID: "db/host", Version: "1"}},
		"an object less": {{ID: "db/password", Version: "3"}},
		"id and version move across '='": {
			{ID: "db/password=3", Version: ""}, {ID: "db/user", Version: "1"},
		},
		"lines run together": {{ID: "db/password", Version: "3\"\n\"db/user\"=\"1"}},
		"none":               nil,
	}
	for name, o := range different {
		if got := AnnotationValue(o); got == v {
			t.Errorf("%s: same value %q", name, got)
		}
	}
}
