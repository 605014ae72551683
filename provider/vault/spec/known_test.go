package spec

import (
	"strings"
	"testing"
)

// TestUnknownKeysRefused: a class parameter or object field
// keymount-provider-vault does not read is refused, naming the key (and
// the vault-csi-provider release that knows it, or what became of it), never
// its value; the keys the driver adds and keymount.io/ignore-parameters'
// keys pass.
func TestUnknownKeysRefused(t *testing.T) {
	const obj = "- objectName: a\n  secretPath: secret/data/a\n"
	for _, tc := range []struct {
		name  string
		extra map[string]string
		want  []string // in the error; none for accepted
	}{
		{name: "every driver key", extra: map[string]string{"csi.storage.k8s.io/ephemeral": "true", "csi.storage.k8s.io/future": "x"}},
		{name: "keymount's own", extra: map[string]string{KeyShare: "false", KeyRevoke: "false"}},
		{name: "a typo", extra: map[string]string{"vaultAdress": "https://value.example"},
			want: []string{`parameter "vaultAdress" is unknown to keymount-provider-vault`, "vaultAddress", KeyIgnore}},
		{name: "a newer release's auth block", extra: map[string]string{"auth": "type: aws"},
			want: []string{`parameter "auth" is not supported`, "releases after v1.7.4", KeyIgnore}},
		{name: "a dropped parameter", extra: map[string]string{"vaultCAPem": "pem-value"},
			want: []string{`parameter "vaultCAPem" is not read`, "since v0.1.0", KeyCACertPEM}},
		{name: "ignored by the class", extra: map[string]string{"auth": "type: aws", "vaultAdress": "x", KeyIgnore: " auth , vaultAdress,"}},
		{name: "the opt-out lists another key", extra: map[string]string{"auth": "type: aws", KeyIgnore: "vaultAdress"},
			want: []string{`parameter "auth"`}},
		{name: "an unknown object field", extra: map[string]string{KeyObjects: obj + "  secretVersion: \"3\"\n"},
			want: []string{`objects[0]: field "secretVersion" is unknown`, "secretKey", "extract"}},
		{name: "a dropped object field", extra: map[string]string{KeyObjects: obj + "  objectPath: secret/a\n"},
			want: []string{`objects[0]: field "objectPath" is not read`, "renamed secretPath"}},
		{name: "an object field ignored by the class", extra: map[string]string{KeyObjects: obj + "  secretVersion: \"3\"\n", KeyIgnore: "secretVersion"}},
		{name: "every object field", extra: map[string]string{KeyObjects: obj + "  secretKey: k\n  secretArgs: {}\n  method: GET\n  encoding: utf-8\n  filePermission: 0600\n"}},
		{name: "a parameter in another case", extra: map[string]string{"rolename": "app"},
			want: []string{`parameter "rolename"`, `did you mean "roleName"?`}},
		{name: "an object field in another case", extra: map[string]string{KeyObjects: obj + "  secretkey: k\n"},
			want: []string{`objects[0]: field "secretkey"`, `did you mean "secretKey"?`}},
		{name: "every unknown key named", extra: map[string]string{"b-key": "1", "a-key": "2"},
			want: []string{`parameter "a-key"`, `parameter "b-key"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Defaults{}.Parse(attrs(tc.extra), 0o644)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Parse: %v, want accepted", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted %v, want an error", tc.extra)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			for _, v := range []string{"value.example", "pem-value", "type: aws", "tok-"} {
				if strings.Contains(err.Error(), v) {
					t.Errorf("error %q quotes a value (%q)", err, v)
				}
			}
		})
	}
}

// TestPushIdentityRefusesUnknownKeys: a push (ParseIdentity) refuses an
// unknown parameter as a mount does.
func TestPushIdentityRefusesUnknownKeys(t *testing.T) {
	_, err := Defaults{}.ParseIdentity(attrs(map[string]string{"rolename": "app"}))
	if err == nil || !strings.Contains(err.Error(), `parameter "rolename"`) {
		t.Fatalf("ParseIdentity: %v, want an error naming rolename", err)
	}
}
