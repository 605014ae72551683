package classparams

import (
	"maps"
	"slices"
	"strings"
)

// IgnoreKey is the class parameter listing, comma-separated, the keys the
// class author declares safe to ignore: a listed key that the reader does
// not know is ignored instead of refused. Listing a key the reader knows
// changes nothing: it is still read.
const IgnoreKey = "keymount.io/ignore-parameters"

// ClassKey is the volume attribute naming the pod volume's
// SecretProviderClass; the driver passes it on to the provider.
const ClassKey = "secretProviderClass"

// KubeletPrefix starts every key kubelet adds to a volume's context (pod
// name, namespace and UID, service account, tokens, ephemeral), and that
// keymount-controller adds in kubelet's stead for a SecretSync.
const KubeletPrefix = "csi.storage.k8s.io/"

// DriverAdded reports whether key is one the driver, kubelet or
// keymount-controller add to a provider request's attributes, and so no
// class parameter: secretProviderClass and csi.storage.k8s.io/*.
func DriverAdded(key string) bool {
	return key == ClassKey || strings.HasPrefix(key, KubeletPrefix)
}

// Ignored returns the keys params' IgnoreKey lists, spaces around each
// trimmed, empty entries skipped; nil when it lists none.
func Ignored(params map[string]string) map[string]bool {
	var out map[string]bool
	for k := range strings.SplitSeq(params[IgnoreKey], ",") {
		if k = strings.TrimSpace(k); k != "" {
			if out == nil {
				out = map[string]bool{}
			}
			out[k] = true
		}
	}
	return out
}

// Unknown returns, sorted, the keys of attrs that known does not accept,
// that are not DriverAdded, not IgnoreKey itself, and that attrs' IgnoreKey
// does not list: the keys a reader must refuse. Nil when there are none.
func Unknown(attrs map[string]string, known func(key string) bool) []string {
	ignored := Ignored(attrs)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		if !known(k) && !DriverAdded(k) && k != IgnoreKey && !ignored[k] {
			out = append(out, k)
		}
	}
	return out
}
