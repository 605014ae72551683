package driver

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/internal/classparams"
)

// TestUnknownVolumeAttributes: a volume attribute that is neither the
// driver's (secretProviderClass), kubelet's (csi.storage.k8s.io/*), a
// parameter the class sets, nor a key the class lists under
// keymount.io/ignore-parameters fails with InvalidArgument naming it and
// the fix, never its value; the accepted ones reach the provider.
func TestUnknownVolumeAttributes(t *testing.T) {
	tests := []struct {
		name   string
		attrs  map[string]string // added to a valid request's volume context
		ignore string            // the class's keymount.io/ignore-parameters
		want   string            // in the error; "" for accepted
	}{
		{name: "the driver's and kubelet's keys only"},
		{name: "kubelet's keys", attrs: map[string]string{AttrTokens: `{}`, AttrEphemeral: "true", AttrServiceAccount: "sa",
			"csi.storage.k8s.io/a-future-key": "x"}},
		{name: "a parameter the class sets", attrs: map[string]string{"region": "us-east-1"}},
		{name: "a key the class does not set", attrs: map[string]string{"vaultAddress": "https://attacker.example"},
			want: `volume attribute "vaultAddress" is unknown`},
		{name: "a mistyped class attribute", attrs: map[string]string{"secretProviderClassName": "db"},
			want: `volume attribute "secretProviderClassName" is unknown`},
		{name: "a key under kubelet's name without its slash", attrs: map[string]string{"csi.storage.k8s.io": "x"},
			want: `volume attribute "csi.storage.k8s.io" is unknown`},
		{name: "the first unknown key in order", attrs: map[string]string{"zz": "1", "region": "x", "aa": "2"},
			want: `volume attribute "aa"`},
		{name: "a key the class lists as safe to ignore", attrs: map[string]string{"newDriverKey": "x"}, ignore: "other, newDriverKey"},
		{name: "a key the class lists another", attrs: map[string]string{"newDriverKey": "x"}, ignore: "other",
			want: `volume attribute "newDriverKey"`},
		{name: "the pod's own opt-out", attrs: map[string]string{classparams.IgnoreKey: "x"},
			want: `volume attribute "keymount.io/ignore-parameters" is unknown`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := validRequest()
			for k, v := range tc.attrs {
				req.VolumeContext[k] = v
			}
			p, err := parsePublishRequest(req, testKubeletRoot)
			if err != nil {
				t.Fatal(err)
			}
			c := syncingClass(false)
			if tc.ignore != "" {
				c.Spec.Parameters[classparams.IgnoreKey] = tc.ignore
			}
			got, err := buildMountRequest(c, p, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("buildMountRequest: %v", err)
				}
				attrs := decodeAttrs(t, got)
				for k, v := range tc.attrs {
					if attrs[k] != v {
						t.Errorf("attribute %s = %q, want the pod's %q passed on", k, attrs[k], v)
					}
				}
				return
			}
			if !errors.Is(err, errInvalidRequest) || status.Code(toStatus(err)) != codes.InvalidArgument {
				t.Fatalf("err = %v, want InvalidArgument", err)
			}
			msg := status.Convert(toStatus(err)).Message()
			for _, s := range []string{tc.want, "SecretProviderClass shop/db", "spec.parameters", classparams.IgnoreKey} {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q lacks %q", msg, s)
				}
			}
			for _, v := range tc.attrs {
				if len(v) > 2 && strings.Contains(msg, v) {
					t.Errorf("message %q carries the attribute's value %q", msg, v)
				}
			}
		})
	}
}
