package tlsbundle

import (
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"testing"

	"github.com/keymount/keymount/internal/tlsbundle/tlsbundletest"

	"software.sslmate.com/src/go-pkcs12"
)

// FuzzPKCS12 splits fuzzed data as a PKCS#12 archive (raw DER or base64),
// the path splitTLS takes for anything without a PEM block. It fails only
// with one of the fixed errors; an archive asking for too many iterations
// is refused before decoding; on success tls.crt is every certificate as a
// parseable CERTIFICATE block, the one matching the key first, and tls.key
// is one block that parses back to a signing key (or a fixed error for a
// key keymount does not write).
func FuzzPKCS12(f *testing.F) {
	c := tlsbundletest.NewChain(f)
	modern := encodePKCS12(f, pkcs12.Modern, c, c.Leaf, []*x509.Certificate{c.CA}, "")
	legacy := encodePKCS12(f, pkcs12.LegacyRC2, c, c.Leaf, []*x509.Certificate{c.CA}, "")
	for _, seed := range [][]byte{
		modern,
		legacy,
		encodePKCS12(f, pkcs12.Passwordless, c, c.Leaf, []*x509.Certificate{c.CA}, ""),
		encodePKCS12(f, pkcs12.Modern, c, c.CA, []*x509.Certificate{c.Leaf}, ""),
		encodePKCS12(f, pkcs12.Modern, c, c.Leaf, nil, "hunter2"),
		[]byte(base64.StdEncoding.EncodeToString(modern)),
		[]byte(base64.RawStdEncoding.EncodeToString(legacy)),
		wrapBase64(modern),
		manyIterations(f, pkcs12.Modern, c),
		manyIterations(f, pkcs12.LegacyRC2, c),
		modern[:len(modern)/2],
		{0x30, 0x84, 0xff, 0xff, 0xff, 0xff},
		{0x30, 0x80, 0x02, 0x01, 0x03, 0x00, 0x00},
		{0x30, 0x03, 0x02, 0x01, 0x03},
		{0x04, 0x01, 0x00, 0x02, 0x09, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		[]byte("MIIKZQIBAzCCCh8GCSqGSIb3DQEHAaCCChAEggoMMIIKCDCCBL8GCSqGSIb3DQEHBqCC"),
		[]byte("not base64 !!"),
		{},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := splitPKCS12(data)
		if errors.Is(checkIterations(data), errTooManyIterations) && !errors.Is(err, errTooManyIterations) {
			t.Fatalf("an archive asking for too many iterations was decoded: %v", err)
		}
		if err != nil {
			checkFixedError(t, err)
			if p.certs != nil || p.key != nil || p.keyErr != nil {
				t.Fatal("splitPKCS12 returned a pair with an error")
			}
			return
		}
		checkPEMOnly(t, "tls.crt", p.certs)
		certs := parseCertsPEM(t, p.certs)
		if p.keyErr != nil {
			checkFixedError(t, p.keyErr)
			return
		}
		key := tlsbundletest.ParseKeyPEM(t, p.key)
		pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
		if !ok {
			return
		}
		for _, cert := range certs {
			if pub.Equal(cert.PublicKey) && !pub.Equal(certs[0].PublicKey) {
				t.Fatal("the key's certificate is in tls.crt but not first")
			}
		}
	})
}

// parseCertsPEM parses every block of a tls.crt.
func parseCertsPEM(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	for len(data) > 0 {
		block, rest := pem.Decode(data)
		if block == nil || block.Type != pemCertificate {
			t.Fatal("tls.crt holds something other than CERTIFICATE blocks")
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("tls.crt holds a certificate that does not parse: %v", err)
		}
		certs = append(certs, cert)
		data = rest
	}
	if len(certs) == 0 {
		t.Fatal("tls.crt is empty")
	}
	return certs
}
