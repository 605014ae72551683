package classparams

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestIgnored(t *testing.T) {
	for _, tc := range []struct {
		name string
		list string // IgnoreKey's value; "-" for absent
		want map[string]bool
	}{
		{name: "absent", list: "-"},
		{name: "empty", list: ""},
		{name: "commas and spaces only", list: " , ,"},
		{name: "one", list: "auth", want: map[string]bool{"auth": true}},
		{name: "spaces trimmed, empty entries skipped", list: " auth ,, newKey ,", want: map[string]bool{"auth": true, "newKey": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := map[string]string{"objects": "x"}
			if tc.list != "-" {
				params[IgnoreKey] = tc.list
			}
			if diff := cmp.Diff(tc.want, Ignored(params)); diff != "" {
				t.Errorf("Ignored (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnknown(t *testing.T) {
	known := func(k string) bool { return k == "objects" || k == "region" }
	for _, tc := range []struct {
		name  string
		attrs map[string]string
		want  []string
	}{
		{name: "known only", attrs: map[string]string{"objects": "", "region": ""}},
		{name: "the keys the driver adds", attrs: map[string]string{ClassKey: "c", KubeletPrefix + "pod.name": "p",
			KubeletPrefix + "serviceAccount.tokens": "{}", KubeletPrefix + "ephemeral": "true"}},
		{name: "unknown, sorted", attrs: map[string]string{"zz": "", "objects": "", "aa": "", "Region": ""},
			want: []string{"Region", "aa", "zz"}},
		{name: "kubelet's prefix without its slash", attrs: map[string]string{"csi.storage.k8s.io": ""},
			want: []string{"csi.storage.k8s.io"}},
		{name: "a near miss of the class key", attrs: map[string]string{"secretproviderclass": ""},
			want: []string{"secretproviderclass"}},
		{name: "the opt-out and what it lists", attrs: map[string]string{IgnoreKey: "aa, zz", "aa": "", "zz": "", "mm": ""},
			want: []string{"mm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Unknown(tc.attrs, known)); diff != "" {
				t.Errorf("Unknown (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzIgnored: any opt-out value yields trimmed, non-empty keys without a
// comma.
func FuzzIgnored(f *testing.F) {
	f.Add("auth, newKey")
	f.Add(",,, ")
	f.Fuzz(func(t *testing.T, s string) {
		for k := range Ignored(map[string]string{IgnoreKey: s}) {
			if k == "" || k[0] == ' ' || k[len(k)-1] == ' ' || containsComma(k) {
				t.Fatalf("Ignored(%q) holds %q", s, k)
			}
		}
	})
}

func containsComma(s string) bool {
	for _, r := range s {
		if r == ',' {
			return true
		}
	}
	return false
}
