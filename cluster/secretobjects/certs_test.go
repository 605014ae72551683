package secretobjects

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

// testChain is a leaf certificate signed by a CA, with the leaf's key.
type testChain struct {
	leaf, ca *x509.Certificate
	key      *ecdsa.PrivateKey
}

func newTestChain(t testing.TB) testChain {
	t.Helper()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "keymount test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	ca := createCert(t, caTmpl, caTmpl, caKey.Public(), caKey)
	key := newKey(t)
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "app.example.com"},
		DNSNames:     []string{"app.example.com"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leaf := createCert(t, leafTmpl, ca, key.Public(), caKey)
	return testChain{leaf: leaf, ca: ca, key: key}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func createCert(t testing.TB, tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) *x509.Certificate {
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

// certsPEM is the chain's certificates as PEM, leaf first.
func (c testChain) certsPEM() []byte {
	return append(certPEM(c.leaf), certPEM(c.ca)...)
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: c.Raw})
}

// pkcs8PEM is the leaf key as a PKCS#8 PEM block.
func (c testChain) pkcs8PEM(t testing.TB) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(c.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPKCS8Key, Bytes: der})
}

// ecPEM is the leaf key as a SEC 1 "EC PRIVATE KEY" block.
func (c testChain) ecPEM(t testing.TB) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(c.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemECKey, Bytes: der})
}

// parseKeyPEM parses a PEM private key the way a TLS server would.
func parseKeyPEM(t testing.TB, data []byte) crypto.Signer {
	t.Helper()
	block, rest := pem.Decode(data)
	if block == nil || len(rest) != 0 {
		t.Fatalf("tls.key is not exactly one PEM block: %d bytes left", len(rest))
	}
	var key any
	var err error
	switch block.Type {
	case pemPKCS8Key:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case pemRSAKey:
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case pemECKey:
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
