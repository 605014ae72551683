package tlsbundle

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/keymount/keymount/internal/tlsbundle/tlsbundletest"

	corev1 "k8s.io/api/core/v1"
	"software.sslmate.com/src/go-pkcs12"
)

// fixedErrors are every error splitting may return; each message is fixed.
var fixedErrors = []error{
	errNoCertificate, errNoPrivateKey, errSeveralPrivateKeys, errEncryptedKey, ErrNotTLS,
	errPKCS12Password, errPKCS12Unsupported, errPKCS12NoKey, errPKCS12NoCert, errTooManyIterations,
	errKeyUnparsable, errKeyType,
}

func encodePKCS12(t testing.TB, enc *pkcs12.Encoder, c tlsbundletest.Chain, leaf *x509.Certificate, chain []*x509.Certificate, password string) []byte {
	t.Helper()
	der, err := enc.Encode(c.Key, leaf, chain, password)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// markerIterations encodes as the DER INTEGER 02 03 01 02 03; manyIterations
// turns it into 02 03 7f ff ff (8,388,607), the same length, so an archive
// asks for many iterations without the test spending them on encoding.
const markerIterations = 0x010203

func manyIterations(t testing.TB, enc *pkcs12.Encoder, c tlsbundletest.Chain) []byte {
	t.Helper()
	der := encodePKCS12(t, enc.WithIterations(markerIterations), c, c.Leaf, []*x509.Certificate{c.CA}, "")
	marker := []byte{2, 3, 1, 2, 3}
	if bytes.Count(der, marker) == 0 {
		t.Fatal("no iteration count in the archive")
	}
	return bytes.ReplaceAll(der, marker, []byte{2, 3, 0x7f, 0xff, 0xff})
}

// wrapBase64 is base64 with line breaks, as some tools print it.
func wrapBase64(der []byte) []byte {
	s := base64.StdEncoding.EncodeToString(der)
	var b strings.Builder
	for len(s) > 64 {
		b.WriteString(s[:64] + "\n")
		s = s[64:]
	}
	b.WriteString(s + "\n")
	return []byte(b.String())
}

func TestTLSPartSplitsPEMAndPKCS12(t *testing.T) {
	c := tlsbundletest.NewChain(t)
	bundle := bytes.Join([][]byte{c.CertsPEM(), c.PKCS8PEM(t)}, nil)
	modern := encodePKCS12(t, pkcs12.Modern, c, c.Leaf, []*x509.Certificate{c.CA}, "")
	tests := []struct {
		name string
		data []byte
	}{
		{"PEM certificates then PKCS#8 key", bundle},
		{"PEM key first", bytes.Join([][]byte{c.PKCS8PEM(t), c.CertsPEM()}, nil)},
		{"PEM with EC PARAMETERS and EC key, as openssl writes it",
			bytes.Join([][]byte{pem.EncodeToMemory(&pem.Block{Type: "EC PARAMETERS", Bytes: []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7}}), c.ECPEM(t), c.CertsPEM()}, nil)},
		{"PEM with text around blocks", bytes.Join([][]byte{[]byte("subject=CN = app\n"), c.CertsPEM(), []byte("\nkey:\n"), c.PKCS8PEM(t)}, nil)},
		{"PKCS#12 modern, DER", modern},
		{"PKCS#12 modern, base64 (Azure Key Vault)", []byte(base64.StdEncoding.EncodeToString(modern))},
		{"PKCS#12 modern, base64 with line breaks", wrapBase64(modern)},
		{"PKCS#12 legacy RC2, DER", encodePKCS12(t, pkcs12.LegacyRC2, c, c.Leaf, []*x509.Certificate{c.CA}, "")},
		{"PKCS#12 passwordless", encodePKCS12(t, pkcs12.Passwordless, c, c.Leaf, []*x509.Certificate{c.CA}, "")},
		{"PKCS#12 that lists the CA before the leaf", encodePKCS12(t, pkcs12.Modern, c, c.CA, []*x509.Certificate{c.Leaf}, "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crt, err := Part(tt.data, corev1.TLSCertKey)
			if err != nil {
				t.Fatalf("tls.crt: %v", err)
			}
			if !bytes.Equal(crt, c.CertsPEM()) {
				t.Errorf("tls.crt is not the leaf then the CA as PEM:\n%s", crt)
			}
			key, err := Part(tt.data, corev1.TLSPrivateKeyKey)
			if err != nil {
				t.Fatalf("tls.key: %v", err)
			}
			if !c.Key.PublicKey.Equal(tlsbundletest.ParseKeyPEM(t, key).Public()) {
				t.Error("tls.key is not the leaf's key")
			}
			if _, err := tls.X509KeyPair(crt, key); err != nil {
				t.Errorf("tls.crt and tls.key do not make a key pair: %v", err)
			}
		})
	}
}

func TestTLSPartErrors(t *testing.T) {
	c := tlsbundletest.NewChain(t)
	withPassword := encodePKCS12(t, pkcs12.Modern, c, c.Leaf, nil, "hunter2")
	encrypted := pem.EncodeToMemory(&pem.Block{Type: pemECKey, Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: []byte{1, 2, 3}})
	tests := []struct {
		name string
		data []byte
		key  string
		want error
	}{
		{"PEM without key", c.CertsPEM(), corev1.TLSPrivateKeyKey, errNoPrivateKey},
		{"PEM without certificate", c.PKCS8PEM(t), corev1.TLSCertKey, errNoCertificate},
		{"key block that holds no key", append(c.CertsPEM(), pem.EncodeToMemory(&pem.Block{Type: pemPKCS8Key, Bytes: []byte("not a key")})...),
			corev1.TLSPrivateKeyKey, errKeyUnparsable},
		{"X25519 key, which cannot sign", append(c.CertsPEM(), x25519PEM(t)...), corev1.TLSPrivateKeyKey, errKeyType},
		{"two keys", bytes.Join([][]byte{c.CertsPEM(), c.PKCS8PEM(t), c.ECPEM(t)}, nil), corev1.TLSPrivateKeyKey, errSeveralPrivateKeys},
		{"PKCS#8 encrypted key", append(c.CertsPEM(), pem.EncodeToMemory(&pem.Block{Type: pemEncryptedKey, Bytes: []byte{1}})...), corev1.TLSPrivateKeyKey, errEncryptedKey},
		{"legacy encrypted PEM key", append(c.CertsPEM(), encrypted...), corev1.TLSPrivateKeyKey, errEncryptedKey},
		{"PKCS#12 with a password", withPassword, corev1.TLSCertKey, errPKCS12Password},
		{"base64 PKCS#12 with a password", []byte(base64.StdEncoding.EncodeToString(withPassword)), corev1.TLSPrivateKeyKey, errPKCS12Password},
		{"PKCS#12 asking for 8 million iterations", manyIterations(t, pkcs12.Modern, c), corev1.TLSCertKey, errTooManyIterations},
		{"legacy PKCS#12 asking for 8 million iterations", manyIterations(t, pkcs12.LegacyRC2, c), corev1.TLSPrivateKeyKey, errTooManyIterations},
		{"base64 PKCS#12 asking for 8 million iterations", []byte(base64.StdEncoding.EncodeToString(manyIterations(t, pkcs12.Modern, c))), corev1.TLSPrivateKeyKey, errTooManyIterations},
		{"text", []byte("correct horse battery staple"), corev1.TLSCertKey, ErrNotTLS},
		{"base64 of text", []byte(base64.StdEncoding.EncodeToString([]byte("not a pfx"))), corev1.TLSCertKey, ErrNotTLS},
		{"empty", nil, corev1.TLSPrivateKeyKey, ErrNotTLS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Part(tt.data, tt.key)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Part = %d bytes, %v; want %v", len(got), err, tt.want)
			}
			if got != nil {
				t.Errorf("tlsPart returned %d bytes with an error", len(got))
			}
		})
	}
}

// A certificate bundle without a key still fills tls.crt: only tls.key needs one.
func TestTLSPartCertificatesWithoutKey(t *testing.T) {
	c := tlsbundletest.NewChain(t)
	got, err := Part(c.CertsPEM(), corev1.TLSCertKey)
	if err != nil || !bytes.Equal(got, c.CertsPEM()) {
		t.Fatalf("tls.crt = %q, %v", got, err)
	}
}

func FuzzSplit(f *testing.F) {
	c := tlsbundletest.NewChain(f)
	modern := encodePKCS12(f, pkcs12.Modern, c, c.Leaf, []*x509.Certificate{c.CA}, "")
	f.Add(append(c.CertsPEM(), c.PKCS8PEM(f)...))
	f.Add(append(c.CertsPEM(), c.ECPEM(f)...))
	f.Add(modern)
	f.Add([]byte(base64.StdEncoding.EncodeToString(modern)))
	f.Add(encodePKCS12(f, pkcs12.LegacyRC2, c, c.Leaf, nil, ""))
	f.Add(encodePKCS12(f, pkcs12.Modern, c, c.Leaf, nil, "pw"))
	f.Add(manyIterations(f, pkcs12.Modern, c))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Split(data)
		if err != nil {
			checkFixedError(t, err)
			return
		}
		if p.keyErr != nil {
			checkFixedError(t, p.keyErr)
		}
		for _, key := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
			out, err := Part(data, key)
			if err != nil {
				checkFixedError(t, err)
				continue
			}
			checkPEMOnly(t, key, out)
		}
	})
}

// checkFixedError fails unless err is one of the fixed errors, unwrapped: its
// text then cannot hold a byte of the input.
func checkFixedError(t *testing.T, err error) {
	t.Helper()
	for _, fixed := range fixedErrors {
		if err == fixed { //nolint:errorlint // the error must be the sentinel itself, not wrap anything
			return
		}
	}
	t.Fatalf("error %q is not one of the fixed errors", err)
}

// checkPEMOnly fails unless out is PEM blocks of the type key holds.
func checkPEMOnly(t *testing.T, key string, out []byte) {
	t.Helper()
	if len(out) == 0 {
		t.Fatalf("%s is empty without an error", key)
	}
	for len(out) > 0 {
		block, rest := pem.Decode(out)
		if block == nil {
			t.Fatalf("%s holds something other than PEM", key)
		}
		switch {
		case key == corev1.TLSCertKey && block.Type != pemCertificate,
			key == corev1.TLSPrivateKeyKey && block.Type != pemPKCS8Key && block.Type != pemRSAKey && block.Type != pemECKey:
			t.Fatalf("%s holds a %q block", key, block.Type)
		}
		out = rest
	}
}
