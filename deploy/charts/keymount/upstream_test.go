package keymount_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// Headings of the chart README's two tables of upstream keys.
const (
	honouredHeading = "### Upstream keys that take effect"
	ignoredHeading  = "### Upstream keys that are ignored"
)

// leaves returns the paths ("a.b.c") of the values in vals that are not
// non-empty maps: scalars, nulls, lists and empty maps.
func leaves(vals map[string]any, prefix string, out map[string]bool) {
	for k, v := range vals {
		p := prefix + k
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			leaves(m, p+".", out)
			continue
		}
		out[p] = true
	}
}

// deepCopy copies a values tree (JSON types only).
func deepCopy(t *testing.T, vals map[string]any) map[string]any {
	t.Helper()
	data, err := json.Marshal(vals)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// perturbedAt returns a value for path that differs from v and that
// values.schema.json accepts there (an image pull policy, a container's
// resources, a token request, a duration), else perturbed(v).
func perturbedAt(path string, v any) any {
	last := path[strings.LastIndex(path, ".")+1:]
	switch {
	case last == "pullPolicy":
		if v == "Always" {
			return "Never"
		}
		return "Always"
	case last == "resources" && v != nil:
		return map[string]any{"limits": map[string]any{"cpu": "7"}}
	case last == "rotationPollInterval" && v == nil:
		return "7m"
	case last == "additionalProvidersDirs" && v == nil:
		return []any{"/perturbed"}
	case path == "tokenRequests":
		l, _ := v.([]any)
		return append(slices.Clone(l), map[string]any{"audience": "perturbed"})
	case path == "imagePullSecrets":
		l, _ := v.([]any)
		return append(slices.Clone(l), map[string]any{"name": "perturbed"})
	}
	return perturbed(v)
}

// perturbed returns a value of the same kind as v that differs from it.
func perturbed(v any) any {
	switch v := v.(type) {
	case nil:
		return []any{map[string]any{"name": "perturbed"}}
	case bool:
		return !v
	case string:
		if v == "" {
			return "perturbed"
		}
		return v + "-perturbed"
	case float64:
		return v + 7
	case int:
		return v + 7
	case int64:
		return v + 7
	case map[string]any: // empty
		return map[string]any{"perturbed": "perturbed"}
	case []any:
		if len(v) > 0 {
			if _, ok := v[0].(string); ok {
				return append(slices.Clone(v), "/perturbed")
			}
		}
		return append(slices.Clone(v), map[string]any{"name": "perturbed", "audience": "perturbed"})
	}
	panic(fmt.Sprintf("no perturbation for %T", v))
}

// setPath sets the value at path in vals, creating maps on the way.
func setPath(vals map[string]any, path string, v any) {
	keys := strings.Split(path, ".")
	m := vals
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = v
}

func getPath(vals map[string]any, path string) any {
	var cur any = vals
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// readmeKeys returns the upstream keys of the README table under heading:
// the first column's `key` of each row ("a.*" covers a and all below it).
func readmeKeys(t *testing.T, heading string) []string {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "#"):
			in = line == heading
		case in && strings.HasPrefix(line, "| `"):
			first := strings.Split(line, "|")[1]
			for _, part := range strings.Split(first, ",") {
				part = strings.TrimSpace(part)
				if k, ok := strings.CutPrefix(part, "`"); ok {
					keys = append(keys, strings.TrimSuffix(k, "`"))
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatalf("README.md has no table of keys under %q", heading)
	}
	return keys
}

// covers reports whether the README key k names path: equal, or k is
// "prefix.*" and path is prefix or below it.
func covers(k, path string) bool {
	if prefix, ok := strings.CutSuffix(k, ".*"); ok {
		return path == prefix || strings.HasPrefix(path, prefix+".")
	}
	return k == path
}

// TestUpstreamKeysAccountedFor: every key of the upstream chart's values
// (v1.6's values.yaml and the other keys its templates read) is in exactly
// one of the chart README's two tables, and the README is right about it: a
// key it says takes effect changes what the chart renders when its value
// changes, and a key it says is ignored changes nothing. Each key is
// changed in two releases: upstream's values with both sidecars on (so
// their keys take effect), and the same with every feature on (keymount's
// own image, so the image tag and digest are used).
func TestUpstreamKeysAccountedFor(t *testing.T) {
	ch := loadChart(t)
	upstream := merge(readValues(t, upstreamValues), readValues(t, upstreamOtherKeys))
	paths := map[string]bool{}
	leaves(upstream, "", paths)

	sidecars := map[string]any{"linux": map[string]any{
		"registrar":     map[string]any{"enabled": true},
		"livenessProbe": map[string]any{"enabled": true},
	}}
	bases := map[string]map[string]any{
		"upstream values with the sidecars": merge(upstream, sidecars),
		"every feature":                     merge(upstream, sidecars, readValues(t, allFeatures)),
	}
	baseline := map[string]map[string]string{}
	for name, vals := range bases {
		out, err := renderRaw(ch, vals)
		if err != nil {
			t.Fatalf("render %s: %v", name, err)
		}
		baseline[name] = out
	}
	// takesEffect reports whether changing path changes a render.
	takesEffect := func(t *testing.T, path string) bool {
		changed := false
		for name, vals := range bases {
			vals = deepCopy(t, vals)
			setPath(vals, path, perturbedAt(path, getPath(vals, path)))
			out, err := renderRaw(ch, vals)
			if err != nil {
				t.Errorf("%s: render with %s changed: %v", name, path, err)
				continue
			}
			if !reflect.DeepEqual(out, baseline[name]) {
				changed = true
			}
		}
		return changed
	}

	honoured, ignored := readmeKeys(t, honouredHeading), readmeKeys(t, ignoredHeading)
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		t.Run(path, func(t *testing.T) {
			inHonoured := slices.ContainsFunc(honoured, func(k string) bool { return covers(k, path) })
			inIgnored := slices.ContainsFunc(ignored, func(k string) bool { return covers(k, path) })
			effect := takesEffect(t, path)
			switch {
			case inHonoured && inIgnored:
				t.Errorf("README lists %s both as taking effect and as ignored", path)
			case !inHonoured && !inIgnored:
				t.Errorf("README lists %s in neither table (it does %stake effect)", path, map[bool]string{true: "", false: "not "}[effect])
			case inHonoured && !effect:
				t.Errorf("README says %s takes effect, but changing it changes nothing the chart renders", path)
			case inIgnored && effect:
				t.Errorf("README says %s is ignored, but changing it changes what the chart renders", path)
			}
		})
	}
	// No README row names a key the upstream files do not have.
	for _, k := range slices.Concat(honoured, ignored) {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(paths)), func(p string) bool { return covers(k, p) }) {
			t.Errorf("README lists %s, which is no key of the upstream values files", k)
		}
	}
}

// TestUpstreamValuesRunKeymount: upstream's default values, unchanged,
// install keymount's driver (upstream's own image stands for keymount's
// release), with upstream's settings (sync off, no rotation, the upstream
// provider directories, scheduling) and upstream's sidecars.
func TestUpstreamValuesRunKeymount(t *testing.T) {
	r := render(t, upstreamValues)
	ds, c := r.driver(t)
	if want := "ghcr.io/keymount/keymount-driver:" + loadChart(t).Metadata.AppVersion; c.Image != want {
		t.Errorf("image %q, want %q", c.Image, want)
	}
	for _, arg := range []string{
		"--sync-secrets=false",
		"--provider-dir=/var/run/secrets-store-csi-providers",
		"--additional-provider-dirs=/etc/kubernetes/secrets-store-csi-providers",
		"--kubelet-root-dir=/var/lib/kubelet",
		"--metrics-addr=:8095",
		"--provider-max-recv-size=4194304",
	} {
		if !hasArg(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}
	for _, arg := range c.Args {
		if strings.HasPrefix(arg, "--enable-secret-rotation") || strings.HasPrefix(arg, "--rotation-poll-interval") {
			t.Errorf("rotation is off in upstream's defaults, args have %s", arg)
		}
	}
	// Upstream's scheduling defaults take effect as upstream's.
	want := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if ds.Spec.Template.Spec.Affinity == nil || ds.Spec.Template.Spec.PriorityClassName != "" || !reflect.DeepEqual(ds.Spec.Template.Spec.Tolerations, want) {
		t.Errorf("affinity %v, priorityClassName %q, tolerations %v: want upstream's (virtual-kubelet excluded, none, every taint)",
			ds.Spec.Template.Spec.Affinity, ds.Spec.Template.Spec.PriorityClassName, ds.Spec.Template.Spec.Tolerations)
	}
	if diff := cmp.Diff(int32(1), ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.IntVal); diff != "" {
		t.Errorf("maxUnavailable (-upstream +got):\n%s", diff)
	}
}

func containerNames(cs []corev1.Container) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}
