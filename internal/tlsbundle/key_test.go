package tlsbundle

import (
	"bytes"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/keymount/keymount/internal/tlsbundle/tlsbundletest"

	corev1 "k8s.io/api/core/v1"
	"software.sslmate.com/src/go-pkcs12"
)

// keyCase is a key with a self-signed certificate and the tls.key the
// upstream driver writes for it.
type keyCase struct {
	name    string
	key     crypto.Signer
	cert    *x509.Certificate
	pemType string // of tls.key
	der     []byte // of tls.key
}

func newKeyCases(t *testing.T) []keyCase {
	t.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey := tlsbundletest.NewKey(t)
	ecDER, err := x509.MarshalECPrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return []keyCase{
		{"RSA", rsaKey, selfSigned(t, rsaKey), pemRSAKey, x509.MarshalPKCS1PrivateKey(rsaKey)},
		{"ECDSA", ecKey, selfSigned(t, ecKey), pemECKey, ecDER},
		{"Ed25519", edKey, selfSigned(t, edKey), pemPKCS8Key, pkcs8(t, edKey)},
	}
}

func selfSigned(t *testing.T, key crypto.Signer) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "key.example.com"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	return tlsbundletest.CreateCert(t, tmpl, tmpl, key.Public(), key)
}

func pkcs8(t *testing.T, key any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func x25519PEM(t *testing.T) []byte {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock(pemPKCS8Key, pkcs8(t, k))
}

// TestTLSKeyEncodedAsUpstream: whatever encoding the object uses (PEM
// PKCS#8, PKCS#1 or SEC 1, even a PKCS#1 key in a "PRIVATE KEY" block, or
// PKCS#12), tls.key is PKCS#1 for RSA and SEC 1 for ECDSA, as the upstream
// driver writes it, and PKCS#8 for Ed25519 (which upstream refuses).
func TestTLSKeyEncodedAsUpstream(t *testing.T) {
	for _, kc := range newKeyCases(t) {
		certPEM := tlsbundletest.CertPEM(kc.cert)
		inputs := map[string][]byte{
			"PEM PKCS#8":     append(certPEM, pemBlock(pemPKCS8Key, pkcs8(t, kc.key))...),
			"PKCS#12 DER":    encodeKeyPKCS12(t, kc),
			"PKCS#12 base64": []byte(base64.StdEncoding.EncodeToString(encodeKeyPKCS12(t, kc))),
		}
		switch k := kc.key.(type) {
		case *rsa.PrivateKey:
			inputs["PEM PKCS#1"] = append(certPEM, pemBlock(pemRSAKey, x509.MarshalPKCS1PrivateKey(k))...)
			inputs["PEM PKCS#1 labelled PRIVATE KEY"] = append(certPEM, pemBlock(pemPKCS8Key, x509.MarshalPKCS1PrivateKey(k))...)
			inputs["PEM key before the certificate"] = append(pemBlock(pemPKCS8Key, pkcs8(t, k)), certPEM...)
		case *ecdsa.PrivateKey:
			inputs["PEM SEC 1"] = append(certPEM, pemBlock(pemECKey, kc.der)...)
			inputs["PEM SEC 1 after EC PARAMETERS, as openssl writes it"] = bytes.Join([][]byte{
				pemBlock("EC PARAMETERS", []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7}), pemBlock(pemECKey, kc.der), certPEM,
			}, nil)
		}
		for name, data := range inputs {
			t.Run(kc.name+"/"+name, func(t *testing.T) {
				got, err := Part(data, corev1.TLSPrivateKeyKey)
				if err != nil {
					t.Fatalf("tls.key: %v", err)
				}
				if want := pemBlock(kc.pemType, kc.der); !bytes.Equal(got, want) {
					t.Errorf("tls.key =\n%s\nwant\n%s", got, want)
				}
				crt, err := Part(data, corev1.TLSCertKey)
				if err != nil {
					t.Fatalf("tls.crt: %v", err)
				}
				if !bytes.Equal(crt, certPEM) {
					t.Errorf("tls.crt is not the certificate")
				}
				if _, err := tls.X509KeyPair(crt, got); err != nil {
					t.Errorf("tls.crt and tls.key do not make a key pair: %v", err)
				}
			})
		}
	}
}

func encodeKeyPKCS12(t *testing.T, kc keyCase) []byte {
	t.Helper()
	der, err := pkcs12.Modern.Encode(kc.key, kc.cert, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return der
}
