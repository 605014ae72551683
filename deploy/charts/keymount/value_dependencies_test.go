package keymount_test

import (
	"strings"
	"testing"
)

// TestValueNeedingAnotherIsNoted: a value that needs another which is off
// renders a note naming both (restartOnChange.enabled and
// controller.fanout.enabled without controller.enabled, the controller
// without a provider, rotationPollInterval without enableSecretRotation,
// the driver's settings without linux.enabled); with the other value on,
// or the default values, no note.
func TestValueNeedingAnotherIsNoted(t *testing.T) {
	on := map[string]any{"enabled": true}
	withProvider := map[string]any{"controller": on, "providers": map[string]any{"local": on}}
	for _, tc := range []struct {
		name      string
		vals      map[string]any
		want      []string
		notWanted []string
	}{
		{"defaults", map[string]any{}, nil, []string{"NOTE:"}},
		{"restartOnChange without the controller", map[string]any{"restartOnChange": on},
			[]string{"NOTE: restartOnChange.enabled has no effect while controller.enabled is off"}, nil},
		{"restartOnChange with the controller", merge(withProvider, map[string]any{"restartOnChange": on}), nil, []string{"NOTE:"}},
		{"fan-out without the controller", map[string]any{"controller": map[string]any{"fanout": on}},
			[]string{"NOTE: controller.fanout.enabled has no effect while controller.enabled is off"}, nil},
		{"fan-out with the controller", merge(withProvider, map[string]any{"controller": map[string]any{"fanout": on}}), nil, []string{"NOTE:"}},
		{"the controller without a provider", map[string]any{"controller": on},
			[]string{"NOTE: controller.enabled is on, but no provider runs", "providers.local.enabled", "controller.providerContainer"}, nil},
		{"the controller with keymountProviders off", map[string]any{"controller": map[string]any{"enabled": true, "keymountProviders": false},
			"providers": map[string]any{"aws": on}}, []string{"NOTE: controller.enabled is on, but no provider runs"}, nil},
		{"the controller with a third-party provider", map[string]any{"controller": map[string]any{"enabled": true,
			"providerContainer": []any{map[string]any{"name": "provider-e2e", "image": "registry.example.com/e2e:v1"}}}}, nil, []string{"NOTE:"}},
		{"rotationPollInterval without rotation", map[string]any{"rotationPollInterval": "5m"},
			[]string{"NOTE: rotationPollInterval (5m) has no effect while\nenableSecretRotation is off"}, nil},
		{"rotationPollInterval with rotation", map[string]any{"rotationPollInterval": "5m", "enableSecretRotation": true}, nil, []string{"NOTE:"}},
		{"driver settings without the driver", map[string]any{"linux": map[string]any{"enabled": false}, "syncSecret": on},
			[]string{"NOTE: syncSecret.enabled and enableSecretRotation have no effect while\nlinux.enabled is off"}, nil},
	} {
		notes := renderNotes(t, tc.vals)
		for _, w := range tc.want {
			if !strings.Contains(notes, w) {
				t.Errorf("%s: NOTES.txt lacks %q:\n%s", tc.name, w, notes)
			}
		}
		for _, w := range tc.notWanted {
			if strings.Contains(notes, w) {
				t.Errorf("%s: NOTES.txt holds %q:\n%s", tc.name, w, notes)
			}
		}
	}
}
