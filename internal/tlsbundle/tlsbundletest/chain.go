// Package tlsbundletest builds certificate chains and keys for the tests of
// TLS splitting: a CA, a leaf it signed and the leaf's key, in PEM.
package tlsbundletest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// Chain is a leaf certificate signed by a CA, with the leaf's key.
type Chain struct {
	Leaf, CA *x509.Certificate
	Key      *ecdsa.PrivateKey
}

// NewChain returns a new chain: an ECDSA CA and a leaf for app.example.com.
func NewChain(t testing.TB) Chain {
	t.Helper()
	caKey := NewKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "keymount test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	ca := CreateCert(t, caTmpl, caTmpl, caKey.Public(), caKey)
	key := NewKey(t)
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "app.example.com"},
		DNSNames:     []string{"app.example.com"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leaf := CreateCert(t, leafTmpl, ca, key.Public(), caKey)
	return Chain{Leaf: leaf, CA: ca, Key: key}
}

// NewKey returns a new ECDSA P-256 key.
func NewKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// CreateCert signs tmpl with signer as parent and parses the result.
func CreateCert(t testing.TB, tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// CertsPEM is the chain's certificates as PEM, leaf first.
func (c Chain) CertsPEM() []byte {
	return append(CertPEM(c.Leaf), CertPEM(c.CA)...)
}

// CertPEM is one certificate as a CERTIFICATE block.
func CertPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// PKCS8PEM is the leaf key as a PKCS#8 PEM block.
func (c Chain) PKCS8PEM(t testing.TB) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(c.Key)
	return keyPEM(t, "PRIVATE KEY", der, err)
}

// ECPEM is the leaf key as a SEC 1 "EC PRIVATE KEY" block.
func (c Chain) ECPEM(t testing.TB) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(c.Key)
	return keyPEM(t, "EC PRIVATE KEY", der, err)
}

// keyPEM is a key's DER as a PEM block of type typ; err is the error of
// marshalling it.
func keyPEM(t testing.TB, typ string, der []byte, err error) []byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// ParseKeyPEM parses a PEM private key the way a TLS server would.
func ParseKeyPEM(t testing.TB, data []byte) crypto.Signer {
	t.Helper()
	block, rest := pem.Decode(data)
	if block == nil || len(rest) != 0 {
		t.Fatalf("tls.key is not exactly one PEM block: %d bytes left", len(rest))
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		t.Fatalf("tls.key block type %q", block.Type)
	}
	if err != nil {
		t.Fatalf("parse tls.key: %v", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		t.Fatalf("tls.key is a %T", key)
	}
	return signer
}
