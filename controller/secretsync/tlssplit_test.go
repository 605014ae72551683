package secretsync

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/keymount/keymount/internal/template"
	"github.com/keymount/keymount/internal/tlsbundle/tlsbundletest"
)

// tlsPair returns a leaf certificate chain and its key in PKCS#8, both PEM.
func tlsPair(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	c := tlsbundletest.NewChain(t)
	return c.CertsPEM(), c.PKCS8PEM(t)
}

// TestTLSSplitOff: by default a kubernetes.io/tls Secret's tls.key is split
// from its object (the key re-encoded, as the driver does); with
// keymount.io/tls-split "false" both keys are the provider's bytes, as
// External Secrets writes them; another value is refused naming the
// annotation.
func TestTLSSplitOff(t *testing.T) {
	certPEM, keyPEM := tlsPair(t)
	ss := spec(string(corev1.SecretTypeTLS), "crt", corev1.TLSCertKey, "key", corev1.TLSPrivateKeyKey)
	in := []string{"crt", string(certPEM), "key", string(keyPEM)}
	c, err := desiredContent(ss, files(in...))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(c.data[corev1.TLSPrivateKeyKey], keyPEM) {
		t.Error("by default the PKCS#8 key is written as returned, want it split and re-encoded as the driver does")
	}
	ss.Annotations = map[string]string{AnnotationTLSSplit: "false"}
	c, err = desiredContent(ss, files(in...))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.data[corev1.TLSPrivateKeyKey], keyPEM) || !bytes.Equal(c.data[corev1.TLSCertKey], certPEM) {
		t.Error("with tls-split false, tls.crt and tls.key differ from the provider's bytes")
	}
	ss.Annotations[AnnotationTLSSplit] = "no"
	if _, err := desiredContent(ss, files(in...)); err == nil || !strings.Contains(err.Error(), AnnotationTLSSplit) {
		t.Errorf("tls-split no: %v, want an error naming the annotation", err)
	}
}

// TestTLSTemplatedKeysNotSplit: a tls.crt and tls.key written by templates
// keep their placeholder sources unsplit (keymount convert's output for an
// ExternalSecret whose template writes both): the templates' output is the
// Secret's, byte for byte.
func TestTLSTemplatedKeysNotSplit(t *testing.T) {
	certPEM, keyPEM := tlsPair(t)
	ss := spec(string(corev1.SecretTypeTLS), "crt", corev1.TLSCertKey, "crt", corev1.TLSPrivateKeyKey)
	ss.Annotations = map[string]string{
		template.AnnotationPrefix + corev1.TLSCertKey:       "{{ .crt }}",
		template.AnnotationPrefix + corev1.TLSPrivateKeyKey: "{{ .key }}",
	}
	c, err := desiredContent(ss, files("crt", string(certPEM), "key", string(keyPEM)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.data[corev1.TLSPrivateKeyKey], keyPEM) || !bytes.Equal(c.data[corev1.TLSCertKey], certPEM) {
		t.Error("templated tls.crt and tls.key differ from the templates' output")
	}
}
