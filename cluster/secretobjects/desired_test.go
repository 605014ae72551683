package secretobjects

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/atomicwrite"
	"github.com/keymount/keymount/internal/tlsbundle"
	"github.com/keymount/keymount/internal/tlsbundle/tlsbundletest"
)

func data(pairs ...string) []*secretsstorev1.SecretObjectData {
	var d []*secretsstorev1.SecretObjectData
	for i := 0; i+1 < len(pairs); i += 2 {
		d = append(d, &secretsstorev1.SecretObjectData{ObjectName: pairs[i], Key: pairs[i+1]})
	}
	return d
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		so   secretsstorev1.SecretObject
		want string // substring of the message; "" for valid
	}{
		{"valid Opaque", secretsstorev1.SecretObject{SecretName: "db", Type: "Opaque", Data: data("db/password", "password")}, ""},
		{"no type is Opaque", secretsstorev1.SecretObject{SecretName: "db", Data: data("a", "a")}, ""},
		{"valid TLS", secretsstorev1.SecretObject{SecretName: "web", Type: "kubernetes.io/tls", Data: data("cert", "tls.crt", "cert", "tls.key")}, ""},
		{"labels and annotations", secretsstorev1.SecretObject{SecretName: "db", Data: data("a", "a"),
			Labels: map[string]string{"app.kubernetes.io/name": "db"}, Annotations: map[string]string{"example.com/note": "free text, anything"}}, ""},
		{"no name", secretsstorev1.SecretObject{Data: data("a", "a")}, `secretObjects[0] has no secretName`},
		{"bad name", secretsstorev1.SecretObject{SecretName: "DB_Pass", Data: data("a", "a")}, `secretName "DB_Pass" is not a valid Secret name`},
		{"no data", secretsstorev1.SecretObject{SecretName: "db"}, `Secret "db" (class "spc" secretObjects[0]) lists no data`},
		{"nil data entry", secretsstorev1.SecretObject{SecretName: "db", Data: []*secretsstorev1.SecretObjectData{nil}}, "data[0] has no objectName"},
		{"no objectName", secretsstorev1.SecretObject{SecretName: "db", Data: data("", "k")}, "data[0] has no objectName"},
		{"no key", secretsstorev1.SecretObject{SecretName: "db", Data: data("a", "a", "b", "")}, "data[1] has no key"},
		{"bad key", secretsstorev1.SecretObject{SecretName: "db", Data: data("a", "a/b")}, `data[0].key "a/b" is not a valid Secret key`},
		{"TLS without tls.key", secretsstorev1.SecretObject{SecretName: "web", Type: "kubernetes.io/tls", Data: data("cert", "tls.crt")}, "needs the keys tls.crt and tls.key"},
		{"bad label key", secretsstorev1.SecretObject{SecretName: "db", Data: data("a", "a"), Labels: map[string]string{"a b": "x"}}, `labels: key "a b"`},
		{"bad label value", secretsstorev1.SecretObject{SecretName: "db", Data: data("a", "a"), Labels: map[string]string{"app": "a b"}}, `labels: value of "app"`},
		{"bad annotation key", secretsstorev1.SecretObject{SecretName: "db", Data: data("a", "a"), Annotations: map[string]string{"/x": "y"}}, `annotations: key "/x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := validate("spc", 0, &tt.so)
			switch {
			case tt.want == "" && got != "":
				t.Errorf("validate = %q, want valid", got)
			case !strings.Contains(got, tt.want):
				t.Errorf("validate = %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

func TestDesiredSecretMapsObjectsToKeys(t *testing.T) {
	c := tlsbundletest.NewChain(t)
	bundle := append(c.CertsPEM(), c.PKCS8PEM(t)...)
	files := newVolumeFiles([]atomicwrite.File{
		{Path: "db/password", Contents: []byte("s3cret")},
		{Path: "empty", Contents: []byte{}},
		{Path: "tls/bundle.pem", Contents: bundle},
		{Path: "ca.pem", Contents: tlsbundletest.CertPEM(c.CA)},
	})
	tests := []struct {
		name string
		so   secretsstorev1.SecretObject
		want *desired
	}{
		{
			name: "Opaque copies bytes, objectName may have directories",
			so: secretsstorev1.SecretObject{
				SecretName: "db", Type: " Opaque ", Data: data("db/password", "password", "./db/password", "again", "empty", "empty"),
				Labels:      map[string]string{"app": "db", ManagedLabel: "false"},
				Annotations: map[string]string{"note": "x", ClassAnnotation: "someone-else"},
			},
			want: &desired{
				namespace: "ns", name: "db", class: "spc", typ: corev1.SecretTypeOpaque,
				data:        map[string][]byte{"password": []byte("s3cret"), "again": []byte("s3cret"), "empty": {}},
				labels:      map[string]string{"app": "db", ManagedLabel: "true"},
				annotations: map[string]string{"note": "x", ClassAnnotation: "spc"},
			},
		},
		{
			name: "TLS splits tls.crt and tls.key, copies other keys",
			so: secretsstorev1.SecretObject{
				SecretName: "web", Type: "kubernetes.io/tls",
				Data: data("tls/bundle.pem", "tls.crt", "tls/bundle.pem", "tls.key", "ca.pem", "ca.crt"),
			},
			want: &desired{
				namespace: "ns", name: "web", class: "spc", typ: corev1.SecretTypeTLS,
				data:        map[string][]byte{"tls.crt": c.CertsPEM(), "tls.key": c.ECPEM(t), "ca.crt": tlsbundletest.CertPEM(c.CA)}, // SEC 1: how upstream encodes an EC key
				labels:      map[string]string{ManagedLabel: "true"},
				annotations: map[string]string{ClassAnnotation: "spc"},
			},
		},
		{
			name: "other types copy tls.crt as it is",
			so:   secretsstorev1.SecretObject{SecretName: "raw", Type: "Opaque", Data: data("tls/bundle.pem", "tls.crt")},
			want: &desired{
				namespace: "ns", name: "raw", class: "spc", typ: corev1.SecretTypeOpaque,
				data:        map[string][]byte{"tls.crt": bundle},
				labels:      map[string]string{ManagedLabel: "true"},
				annotations: map[string]string{ClassAnnotation: "spc"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, msg := desiredSecret("ns", "spc", &tt.so, files)
			if msg != "" {
				t.Fatalf("desiredSecret failed: %s", msg)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(desired{})); diff != "" {
				t.Errorf("desiredSecret (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDesiredSecretFailures(t *testing.T) {
	files := newVolumeFiles([]atomicwrite.File{
		{Path: "db/password", Contents: []byte("s3cret-value")},
		{Path: "token", Contents: []byte("tok-value")},
	})
	tests := []struct {
		name string
		so   secretsstorev1.SecretObject
		want []string
	}{
		{
			name: "missing object names it and lists the files",
			so:   secretsstorev1.SecretObject{SecretName: "db", Data: data("db/passwd", "password")},
			want: []string{`Secret "db"`, `object "db/passwd" (key "password") is not mounted`, `class "spc"`, "files in the volume: db/password, token"},
		},
		{
			name: "TLS object that is not TLS names object and key",
			so:   secretsstorev1.SecretObject{SecretName: "web", Type: "kubernetes.io/tls", Data: data("token", "tls.crt", "token", "tls.key")},
			want: []string{`Secret "web": object "token" for key "tls.crt": ` + tlsbundle.ErrNotTLS.Error()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, msg := desiredSecret("ns", "spc", &tt.so, files)
			if got != nil {
				t.Fatalf("desiredSecret = %+v, want a failure", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			for _, secret := range []string{"s3cret-value", "tok-value"} {
				if strings.Contains(msg, secret) {
					t.Errorf("message %q shows file contents", msg)
				}
			}
		})
	}
}

func TestVolumeFilesDescribeIsBounded(t *testing.T) {
	var files []atomicwrite.File
	for i := range 25 {
		files = append(files, atomicwrite.File{Path: fmt.Sprintf("f%02d", i), Contents: []byte("value")})
	}
	got := newVolumeFiles(files).describe()
	if !strings.HasSuffix(got, "f19 and 5 more") || strings.Contains(got, "f20") {
		t.Errorf("describe = %q, want 20 names and a count", got)
	}
	if got := newVolumeFiles(nil).describe(); got != "the volume has no files" {
		t.Errorf("describe of nothing = %q", got)
	}
}
