package spec

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/internal/tlsbundle/tlsbundletest"
)

const objectsYAML = `
- objectName: db-password
  secretPath: secret/data/db
  secretKey: password
- objectName: cert
  secretPath: pki/issue/web
  method: PUT
  secretArgs:
    common_name: a.example.com
    ttl: 1h
  filePermission: 0600
- objectName: blob
  secretPath: /kv1/blob
  secretKey: data
  encoding: BASE64
  filePermission: "0640"
`

func attrs(extra map[string]string) map[string]string {
	a := map[string]string{
		KeyRole: "app", KeyObjects: objectsYAML, KeyPodNamespace: "ns", KeyServiceAccount: "sa",
		KeyPodName: "pod", KeyPodUID: "uid", KeyClass: "spc",
		KeyTokens: `{"vault":{"token":"tok-vault","expirationTimestamp":"2030-01-01T00:00:00Z"},"other":{"token":"tok-other"}}`,
	}
	for k, v := range extra {
		if v == "-" {
			delete(a, k)
			continue
		}
		a[k] = v
	}
	return a
}

// TestParse: every vault-csi-provider v1.7 parameter and its default.
func TestParse(t *testing.T) {
	s, err := Defaults{}.Parse(attrs(map[string]string{
		KeyAddress: "https://vault.example:8200/", KeyNamespace: "team-a", KeyKubeMount: "k8s",
		KeyCACert: "/ca.pem", KeyCADir: "/cas", KeyTLSServerName: "vault", KeyClientCert: "/c.pem", KeyClientKey: "/c.key",
		KeySkipVerify: "true", KeyShare: "true", KeyRevoke: "true",
	}), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	want := &Spec{
		Address: "https://vault.example:8200", Role: "app", AuthMount: "k8s", VaultNamespace: "team-a",
		TLS:      TLS{CACert: "/ca.pem", CADir: "/cas", ServerName: "vault", ClientCert: "/c.pem", ClientKey: "/c.key", SkipVerify: true},
		Audience: DefaultAudience, Share: true, Revoke: true, Namespace: "ns", ServiceAccount: "sa", PodName: "pod", PodUID: "uid", Class: "spc",
		Token: "tok-vault", Permission: 0o644,
		Objects: []Object{
			{Name: "db-password", Path: "secret/data/db", Key: "password", Method: MethodGet, Encoding: EncodingUTF8},
			{Name: "cert", Path: "pki/issue/web", Method: MethodPut, Encoding: EncodingUTF8, Mode: 0o600,
				Args: map[string]any{"common_name": "a.example.com", "ttl": "1h"}},
			{Name: "blob", Path: "kv1/blob", Key: "data", Method: MethodGet, Encoding: EncodingBase64, Mode: 0o640},
		},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	if strings.Contains(s.String(), "tok-vault") {
		t.Errorf("String() prints the token: %s", s)
	}
}

func TestParseDefaultsAndPrecedence(t *testing.T) {
	s, err := Defaults{}.Parse(attrs(map[string]string{KeyAuthMount: "/auth/jwt/", KeyKubeMount: "k8s", KeyAudience: "other"}), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if s.AuthMount != "jwt" || s.Audience != "other" || s.Token != "tok-other" {
		t.Errorf("auth mount %q audience %q token of audience other %t; want jwt (vaultAuthMountPath wins), other, true",
			s.AuthMount, s.Audience, s.Token == "tok-other")
	}
	s, err = Defaults{}.Parse(attrs(nil), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if s.AuthMount != DefaultAuthMount || s.Audience != DefaultAudience || s.Share {
		t.Errorf("defaults: auth mount %q audience %q share %t", s.AuthMount, s.Audience, s.Share)
	}
}

// TestParseProviderDefaults: the provider's flags (-vault-mount,
// -vault-namespace, -vault-tls-*) fill what a class does not set; what it
// sets wins, field by field, vaultSkipTLSVerify "false" included.
func TestParseProviderDefaults(t *testing.T) {
	d := Defaults{AuthMount: "jwt", VaultNamespace: "ns-flag", TLS: TLS{CACert: "/flag/ca.pem", CADir: "/flag/cas",
		ServerName: "flag.vault", ClientCert: "/flag/c.pem", ClientKey: "/flag/c.key", SkipVerify: true}}
	s, err := d.Parse(attrs(nil), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if s.AuthMount != "jwt" || s.VaultNamespace != "ns-flag" || s.TLS != d.TLS {
		t.Errorf("a class without the parameters: auth mount %q namespace %q TLS %+v, want the defaults %+v", s.AuthMount, s.VaultNamespace, s.TLS, d)
	}
	s, err = d.Parse(attrs(map[string]string{KeyKubeMount: "k8s", KeyNamespace: "ns-class", KeyCACert: "/class/ca.pem",
		KeyTLSServerName: "class.vault", KeyClientCert: "/class/c.pem", KeyClientKey: "/class/c.key", KeySkipVerify: "false"}), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	want := TLS{CACert: "/class/ca.pem", CADir: "/flag/cas", ServerName: "class.vault", ClientCert: "/class/c.pem", ClientKey: "/class/c.key"}
	if s.AuthMount != "k8s" || s.VaultNamespace != "ns-class" || s.TLS != want {
		t.Errorf("a class with the parameters: auth mount %q namespace %q TLS %+v, want k8s, ns-class, %+v", s.AuthMount, s.VaultNamespace, s.TLS, want)
	}
	if _, err := (Defaults{TLS: TLS{ClientKey: "/flag/c.key"}}).Parse(attrs(map[string]string{KeyClientCert: "/class/c.pem"}), 0o644); err != nil {
		t.Errorf("class certificate with the provider's key: %v, want them paired", err)
	}
	_, err = (Defaults{TLS: TLS{ClientCert: "/flag/c.pem"}}).Parse(attrs(nil), 0o644)
	if err == nil || !strings.Contains(err.Error(), "-vault-tls-client-key") {
		t.Errorf("the provider's certificate without a key: %v, want an error naming -vault-tls-client-key", err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]string
		want  string
	}{
		{"no role", map[string]string{KeyRole: "-"}, "roleName is empty"},
		{"skip verify", map[string]string{KeySkipVerify: "yes please"}, `vaultSkipTLSVerify "yes please"`},
		{"half a client pair", map[string]string{KeyClientCert: "/c.pem"}, "set both vaultTLSClientCertPath and vaultTLSClientKeyPath"},
		{"no objects", map[string]string{KeyObjects: "-"}, "objects is empty"},
		{"objects not a list", map[string]string{KeyObjects: "objectName: a"}, "objects is not a YAML list"},
		{"no objectName", map[string]string{KeyObjects: "- secretPath: a"}, "objects[0]: objectName is empty"},
		{"no secretPath", map[string]string{KeyObjects: "- objectName: a"}, `object "a": secretPath is empty`},
		{"escaping name", map[string]string{KeyObjects: "- {objectName: ../a, secretPath: a}"}, "not a clean relative file name"},
		{"twice", map[string]string{KeyObjects: "- {objectName: a, secretPath: a}\n- {objectName: a, secretPath: b}"}, "listed twice"},
		{"method", map[string]string{KeyObjects: "- {objectName: a, secretPath: a, method: DELETE}"}, `method "DELETE": use GET, PUT or POST`},
		{"encoding", map[string]string{KeyObjects: "- {objectName: a, secretPath: a, encoding: rot13}"}, `encoding "rot13"`},
		{"mode", map[string]string{KeyObjects: "- {objectName: a, secretPath: a, filePermission: 01777}"}, "more than 0777"},
		{"mode string", map[string]string{KeyObjects: `- {objectName: a, secretPath: a, filePermission: "rw"}`}, "not an octal file mode"},
		{"tokens", map[string]string{KeyTokens: "{not json tok-secret"}, "contents not shown"},
		{"revoke", map[string]string{KeyRevoke: "at once"}, `revokeOnUnpublish "at once"`},
		{"share without class", map[string]string{KeyShare: "true", KeyClass: "-"}, "shareAcrossReplicas needs"},
		{"inline CA and a CA file", map[string]string{KeyCACertPEM: "x", KeyCACert: "/ca.pem"}, "vaultCACertPEM and vaultCACertPath or vaultCADirectory are both set"},
		{"inline CA without a certificate", map[string]string{KeyCACertPEM: "not a PEM"}, "vaultCACertPEM holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Defaults{}.Parse(attrs(tc.extra), 0o644)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "tok-") {
				t.Errorf("the error quotes a token: %v", err)
			}
		})
	}
}

// FuzzParseObjects: any objects YAML parses or fails cleanly; what parses
// is a valid object list.
func FuzzParseObjects(f *testing.F) {
	f.Add(objectsYAML)
	f.Add("- {objectName: a, secretPath: b, filePermission: 0o600}")
	f.Add("- objectName: a\n  secretPath: b\n  secretArgs: {x: [1, 2]}\n  method: post")
	f.Add("[]")
	f.Fuzz(func(t *testing.T, s string) {
		objs, err := ParseObjects(s)
		if err != nil {
			return
		}
		if len(objs) == 0 {
			t.Fatal("no error and no object")
		}
		seen := map[string]bool{}
		for _, o := range objs {
			if o.Name == "" || o.Path == "" || seen[o.Name] || strings.HasPrefix(o.Name, "/") || strings.Contains("/"+o.Name+"/", "/../") {
				t.Fatalf("invalid object accepted: %+v", o)
			}
			seen[o.Name] = true
			if o.Mode&^os.ModePerm != 0 {
				t.Fatalf("mode %v accepted", o.Mode)
			}
			switch o.Method {
			case MethodGet, MethodPut, MethodPost:
			default:
				t.Fatalf("method %q accepted", o.Method)
			}
		}
	})
}

// TestInlineCAReplacesTheProviderCAFiles: a class's vaultCACertPEM
// replaces the CA files of the provider's -vault-tls-ca-* flags.
func TestInlineCAReplacesTheProviderCAFiles(t *testing.T) {
	ca := string(tlsbundletest.CertPEM(tlsbundletest.NewChain(t).CA))
	s, err := Defaults{TLS: TLS{CACert: "/etc/vault/ca.pem", CADir: "/etc/vault/cas"}}.Parse(attrs(map[string]string{KeyCACertPEM: ca}), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if s.TLS.CACert != "" || s.TLS.CADir != "" || s.TLS.CACertPEM != ca {
		t.Errorf("TLS = %+v, want the inline CA only", s.TLS)
	}
}

// TestObjectsExtract: an object's extract (keymount's key) compiles its
// options; with a secretKey, another method or encoding, or bad options it
// is refused naming the object.
func TestObjectsExtract(t *testing.T) {
	objs, err := ParseObjects("- objectName: datafrom-0\n  secretPath: secret/data/app\n  extract: {conversionStrategy: Unicode}\n")
	if err != nil || len(objs) != 1 || objs[0].Extract == nil {
		t.Fatalf("extract: %+v, %v; want one object with its extract", objs, err)
	}
	if got, err := objs[0].Extract.Extract([]byte(`{"a/b":"v"}`)); err != nil || string(got["a_U002f_b"]) != "v" {
		t.Errorf("the compiled extract gives %v, %v; want key a_U002f_b", got, err)
	}
	for _, bad := range []string{
		"- objectName: d\n  secretPath: p\n  secretKey: k\n  extract: {}\n",
		"- objectName: d\n  secretPath: p\n  method: PUT\n  extract: {}\n",
		"- objectName: d\n  secretPath: p\n  encoding: base64\n  extract: {}\n",
		"- objectName: d\n  secretPath: p\n  extract: {decodingStrategy: Rot13}\n",
	} {
		if _, err := ParseObjects(bad); err == nil || !strings.Contains(err.Error(), `"d"`) {
			t.Errorf("ParseObjects(%q): %v, want an error naming object d", bad, err)
		}
	}
}
