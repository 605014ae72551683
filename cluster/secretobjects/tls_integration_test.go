//go:build integration

package secretobjects

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"testing"

	"github.com/keymount/keymount/internal/tlsbundle/tlsbundletest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"software.sslmate.com/src/go-pkcs12"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

func testTLS(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	chain := tlsbundletest.NewChain(t)
	pfx, err := pkcs12.Modern.Encode(chain.Key, chain.Leaf, []*x509.Certificate{chain.CA}, "")
	if err != nil {
		t.Fatal(err)
	}
	spc := cl.class(t, ns, "web",
		&secretsstorev1.SecretObject{SecretName: "web-pem", Type: "kubernetes.io/tls", Data: data("certs/web.pem", "tls.crt", "certs/web.pem", "tls.key")},
		&secretsstorev1.SecretObject{SecretName: "web-pfx", Type: "kubernetes.io/tls", Data: data("web-pfx", "tls.crt", "web-pfx", "tls.key")},
	)
	pod := cl.pod(t, ns, "app", "node-a", "web")
	vol := newVolume(t, map[string]string{
		"certs/web.pem": string(append(chain.CertsPEM(), chain.PKCS8PEM(t)...)),
		"web-pfx":       base64.StdEncoding.EncodeToString(pfx), // as Azure Key Vault serves it
	})
	n := cl.node("node-a", nil)
	checkCondition(t, n.sync(t, outcome(pod, spc, vol)), metav1.ConditionTrue, ReasonSynced, `"web-pem"`, `"web-pfx"`)

	for _, name := range []string{"web-pem", "web-pfx"} {
		s := cl.secret(t, ns, name)
		if s.Type != corev1.SecretTypeTLS {
			t.Errorf("%s: type %q", name, s.Type)
		}
		if string(s.Data[corev1.TLSCertKey]) != string(chain.CertsPEM()) {
			t.Errorf("%s: tls.crt is not the leaf then the CA", name)
		}
		if string(s.Data[corev1.TLSPrivateKeyKey]) != string(chain.ECPEM(t)) {
			t.Errorf("%s: tls.key is not the key as SEC 1, as the upstream driver writes an EC key", name)
		}
		pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			t.Errorf("%s: not a key pair: %v", name, err)
			continue
		}
		if !pair.Leaf.Equal(chain.Leaf) {
			t.Errorf("%s: leaf is %s", name, pair.Leaf.Subject)
		}
	}
}
