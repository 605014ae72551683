package tlsbundle

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// ParseCertificates returns every CERTIFICATE block of data, parsed, in order.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return certs, nil
		}
		if block.Type != pemCertificate {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
}

// ParsePrivateKey returns the first private key block of data, parsed:
// PKCS#8, PKCS#1 (RSA) or SEC 1 (EC).
func ParsePrivateKey(data []byte) (any, error) {
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PRIVATE KEY block in the key")
		}
		switch block.Type {
		case pemPKCS8Key:
			return x509.ParsePKCS8PrivateKey(block.Bytes)
		case pemRSAKey:
			return x509.ParsePKCS1PrivateKey(block.Bytes)
		case pemECKey:
			return x509.ParseECPrivateKey(block.Bytes)
		}
		if strings.HasSuffix(block.Type, "PRIVATE KEY") {
			return nil, fmt.Errorf("private key block %q not supported", block.Type)
		}
	}
}

// LeafFirst moves the certificate of key's public key to the front; the
// others keep their order. An archive need not list its leaf first.
func LeafFirst(certs []*x509.Certificate, key any) []*x509.Certificate {
	priv, ok := key.(interface{ Public() crypto.PublicKey })
	if !ok {
		return certs
	}
	pub, ok := priv.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok {
		return certs
	}
	for i, c := range certs {
		if pub.Equal(c.PublicKey) {
			out := append([]*x509.Certificate{c}, certs[:i]...)
			return append(out, certs[i+1:]...)
		}
	}
	return certs
}

// OrderChain puts a chain in order: the leaf (the one certificate that
// issued none of the others), then its issuer, and so on; certificates it
// cannot place (several leaves, disjoint chains) keep their order after it.
func OrderChain(certs []*x509.Certificate) []*x509.Certificate {
	var leaves []int
	for i, c := range certs {
		issuer := false
		for j, o := range certs {
			if i != j && bytes.Equal(c.RawSubject, o.RawIssuer) && !bytes.Equal(o.RawSubject, o.RawIssuer) {
				issuer = true
				break
			}
		}
		if !issuer {
			leaves = append(leaves, i)
		}
	}
	if len(leaves) != 1 {
		return certs
	}
	used := make([]bool, len(certs))
	ordered := []*x509.Certificate{certs[leaves[0]]}
	used[leaves[0]] = true
	for cur := certs[leaves[0]]; !bytes.Equal(cur.RawSubject, cur.RawIssuer); {
		next := -1
		for j, o := range certs {
			if !used[j] && bytes.Equal(o.RawSubject, cur.RawIssuer) {
				next = j
				break
			}
		}
		if next < 0 {
			break
		}
		used[next] = true
		cur = certs[next]
		ordered = append(ordered, cur)
	}
	for j, c := range certs {
		if !used[j] {
			ordered = append(ordered, c)
		}
	}
	return ordered
}

// EncodeCertificates encodes certs as CERTIFICATE blocks, in order.
func EncodeCertificates(certs []*x509.Certificate) []byte {
	var out bytes.Buffer
	for _, c := range certs {
		out.Write(pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: c.Raw}))
	}
	return out.Bytes()
}
