package template

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/keymount/keymount/internal/tlsbundle"
)

type testCert struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func (c testCert) pem() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw}))
}

func (c testCert) keyPEM(t *testing.T) string {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(c.key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

// newCert issues a certificate named cn, signed by parent (self-signed when
// parent is nil).
func newCert(t *testing.T, cn string, isCA bool, parent *testCert) testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  isCA,
		BasicConstraintsValid: true,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCert{cert: c, key: key}
}

func chain(t *testing.T) (root, inter, leaf testCert) {
	t.Helper()
	root = newCert(t, "root", true, nil)
	inter = newCert(t, "intermediate", true, &root)
	leaf = newCert(t, "leaf", false, &inter)
	return root, inter, leaf
}

func commonNames(t *testing.T, pemText string) []string {
	t.Helper()
	certs, err := tlsbundle.ParseCertificates([]byte(pemText))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range certs {
		names = append(names, c.Subject.CommonName)
	}
	return names
}

func TestPKCS12Extract(t *testing.T) {
	root, inter, leaf := chain(t)
	for _, pass := range []string{"", "pw"} {
		// CA certificates deliberately out of order: pkcs12cert orders them.
		pfx, err := pkcs12.Modern2023.Encode(leaf.key, leaf.cert, []*x509.Certificate{root.cert, inter.cert}, pass)
		if err != nil {
			t.Fatal(err)
		}
		objs := map[string][]byte{"p12": pfx, "pass": []byte(pass)}
		certs, err := Render("c", `{{ pkcs12certPass .pass .p12 }}`, objs)
		if err != nil {
			t.Fatalf("pkcs12certPass: %v", err)
		}
		if got := strings.Join(commonNames(t, string(certs)), ","); got != "leaf,intermediate,root" {
			t.Errorf("pkcs12cert order = %s, want leaf,intermediate,root", got)
		}
		keyPEM, err := Render("k", `{{ pkcs12keyPass .pass .p12 }}`, objs)
		if err != nil {
			t.Fatalf("pkcs12keyPass: %v", err)
		}
		block, _ := pem.Decode(keyPEM)
		if block == nil || block.Type != "PRIVATE KEY" {
			t.Fatalf("pkcs12key = %q, want a PRIVATE KEY block", keyPEM)
		}
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil || !leaf.key.Equal(k) {
			t.Errorf("pkcs12key returned another key (err %v)", err)
		}
		if pass == "" {
			if _, err := Render("nopass", `{{ pkcs12cert .p12 }}{{ pkcs12key .p12 }}`, objs); err != nil {
				t.Errorf("pkcs12cert/pkcs12key: %v", err)
			}
		}
	}
	if _, err := Render("bad", `{{ pkcs12cert .username }}`, objects); err == nil || !strings.Contains(err.Error(), "pkcs12cert") {
		t.Errorf("pkcs12cert of garbage: error %v, want one naming pkcs12cert", err)
	}
}

func TestPemToPkcs12(t *testing.T) {
	root, inter, leaf := chain(t)
	objs := map[string][]byte{
		"crt": []byte(leaf.pem() + inter.pem() + root.pem()),
		"key": []byte(leaf.keyPEM(t)),
	}
	for _, text := range []string{
		`{{ pemToPkcs12 .crt .key }}`,
		`{{ pemToPkcs12Pass .crt .key "pw" }}`,
		`{{ fullPemToPkcs12 (print .crt .key) }}`,
		`{{ fullPemToPkcs12Pass (print .key .crt) "pw" }}`,
	} {
		out, err := Render("p12", text, objs)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		again, err := Render("p12", text, objs)
		if err != nil || string(again) != string(out) {
			t.Errorf("%s: not deterministic (err %v)", text, err)
		}
		pfx, err := base64.StdEncoding.DecodeString(string(out))
		if err != nil {
			t.Fatalf("%s: output not base64: %v", text, err)
		}
		pass := ""
		if strings.Contains(text, "Pass") {
			pass = "pw"
		}
		k, c, cas, err := pkcs12.DecodeChain(pfx, pass)
		if err != nil {
			t.Fatalf("%s: decode: %v", text, err)
		}
		if !leaf.key.Equal(k) || !c.Equal(leaf.cert) || len(cas) != 2 {
			t.Errorf("%s: archive holds key %v, cert %s, %d CAs; want the leaf's key and cert and 2 CAs", text, leaf.key.Equal(k), c.Subject.CommonName, len(cas))
		}
	}
	if _, err := Render("p12", `{{ pemToPkcs12 .key .key }}`, objs); err == nil {
		t.Error("pemToPkcs12 without a certificate: nil error")
	}
	if _, err := Render("p12", `{{ pemToPkcs12 .crt .crt }}`, objs); err == nil {
		t.Error("pemToPkcs12 without a key: nil error")
	}
}

func TestFilterPEMAndCertChain(t *testing.T) {
	root, inter, leaf := chain(t)
	objs := map[string][]byte{
		"full":     []byte(leaf.keyPEM(t) + root.pem() + leaf.pem() + inter.pem()),
		"chainPem": []byte(inter.pem() + leaf.pem() + root.pem()),
	}
	got, err := Render("f", `{{ filterPEM "CERTIFICATE" .full }}`, objs)
	if err != nil {
		t.Fatal(err)
	}
	if names := strings.Join(commonNames(t, string(got)), ","); names != "root,leaf,intermediate" {
		t.Errorf("filterPEM CERTIFICATE = %s, want root,leaf,intermediate (input order)", names)
	}
	if got, err := Render("f", `{{ filterPEM "EC PRIVATE KEY" .full }}`, objs); err != nil || string(got) != leaf.keyPEM(t) {
		t.Errorf("filterPEM key = %q, %v", got, err)
	}
	if _, err := Render("f", `{{ filterPEM "RSA PRIVATE KEY" .full }}`, objs); err == nil {
		t.Error("filterPEM of an absent type: nil error")
	}
	for typ, want := range map[string]string{"leaf": "leaf", "intermediate": "intermediate", "root": "root"} {
		got, err := Render("f", `{{ filterCertChain "`+typ+`" .chainPem }}`, objs)
		if err != nil {
			t.Fatalf("filterCertChain %s: %v", typ, err)
		}
		if names := strings.Join(commonNames(t, string(got)), ","); names != want {
			t.Errorf("filterCertChain %s = %s, want %s", typ, names, want)
		}
	}
	if _, err := Render("f", `{{ filterCertChain "other" .chainPem }}`, objs); err == nil {
		t.Error("filterCertChain with an unknown type: nil error")
	}
}

func TestJWK(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := jose.JSONWebKey{Key: key}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := jose.JSONWebKey{Key: &key.PublicKey}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string][]byte{"priv": priv, "pub": pub}
	out, err := Render("j", `{{ jwkPrivateKeyPem .priv }}`, objs)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(out)
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("jwkPrivateKeyPem = %q", out)
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err != nil || !key.Equal(k) {
		t.Errorf("jwkPrivateKeyPem: another key (err %v)", err)
	}
	for _, text := range []string{`{{ jwkPublicKeyPem .pub }}`, `{{ jwkPublicKeyPem .priv }}`} {
		out, err := Render("j", text, objs)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(out)
		if block == nil || block.Type != "PUBLIC KEY" {
			t.Fatalf("%s = %q", text, out)
		}
		if k, err := x509.ParsePKIXPublicKey(block.Bytes); err != nil || !key.PublicKey.Equal(k) {
			t.Errorf("%s: another key (err %v)", text, err)
		}
	}
	if _, err := Render("j", `{{ jwkPrivateKeyPem .pub }}`, objs); err == nil {
		t.Error("jwkPrivateKeyPem of a public key: nil error")
	}
	if _, err := Render("j", `{{ jwkPublicKeyPem "{" }}`, objs); err == nil {
		t.Error("jwkPublicKeyPem of bad JSON: nil error")
	}
}

// TestPKCS12CertTrustStore: pkcs12cert reads an archive of certificates
// without a key too.
func TestPKCS12CertTrustStore(t *testing.T) {
	root, inter, _ := chain(t)
	pfx, err := pkcs12.Passwordless.EncodeTrustStore([]*x509.Certificate{root.cert, inter.cert}, "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render("ts", `{{ pkcs12cert .p12 }}`, map[string][]byte{"p12": pfx})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(commonNames(t, string(out)), ","); got != "intermediate,root" {
		t.Errorf("pkcs12cert of a trust store = %s, want intermediate,root", got)
	}
	if _, err := Render("ts", `{{ pkcs12key .p12 }}`, map[string][]byte{"p12": pfx}); err == nil {
		t.Error("pkcs12key of an archive without a key: nil error")
	}
}
