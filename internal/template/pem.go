package template

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/go-jose/go-jose/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// External Secrets' PEM, PKCS#12 and JWK helpers, by their names. A PKCS#12
// input is the archive's raw bytes (an object as the provider returned it);
// a PKCS#12 output is base64-encoded, as External Secrets returns it.

const (
	pemPrivateKey  = "PRIVATE KEY"
	pemCertificate = "CERTIFICATE"
	pemPublicKey   = "PUBLIC KEY"
)

func pkcs12key(input string) (string, error) { return pkcs12keyPass("", input) }

// pkcs12keyPass returns the archive's private key as PKCS#8 PEM.
func pkcs12keyPass(pass, input string) (string, error) {
	key, _, _, err := pkcs12.DecodeChain([]byte(input), pass)
	if err != nil {
		return "", fmt.Errorf("pkcs12key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("pkcs12key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der})), nil
}

func pkcs12cert(input string) (string, error) { return pkcs12certPass("", input) }

// pkcs12certPass returns the archive's certificates as PEM, leaf first, then
// the chain towards the root where it can be ordered.
func pkcs12certPass(pass, input string) (string, error) {
	_, leaf, cas, err := pkcs12.DecodeChain([]byte(input), pass)
	certs := append([]*x509.Certificate{leaf}, cas...)
	if err != nil {
		// An archive of certificates only (a trust store).
		var tsErr error
		if certs, tsErr = pkcs12.DecodeTrustStore([]byte(input), pass); tsErr != nil {
			return "", fmt.Errorf("pkcs12cert: %w", err)
		}
	}
	return encodeCerts(orderChain(certs)), nil
}

func pemToPkcs12(cert, key string) (string, error) { return pemToPkcs12Pass(cert, key, "") }

// pemToPkcs12Pass builds a PKCS#12 archive from a PEM certificate (chain,
// leaf first) and a PEM private key, and returns it base64-encoded.
func pemToPkcs12Pass(cert, key, pass string) (string, error) {
	certs, err := parseCerts(cert)
	if err != nil {
		return "", fmt.Errorf("pemToPkcs12: %w", err)
	}
	if len(certs) == 0 {
		return "", errors.New("pemToPkcs12: no CERTIFICATE block in the certificate")
	}
	k, err := parseKey(key)
	if err != nil {
		return "", fmt.Errorf("pemToPkcs12: %w", err)
	}
	certs = leafFirst(certs, k)
	// The salts come from the inputs, so the same inputs give the same
	// archive and an unchanged Secret is not rewritten.
	enc := pkcs12.Modern2023.WithRand(newSeededReader(cert, key, pass))
	pfx, err := enc.Encode(k, certs[0], certs[1:], pass)
	if err != nil {
		return "", fmt.Errorf("pemToPkcs12: %w", err)
	}
	return base64.StdEncoding.EncodeToString(pfx), nil
}

func fullPemToPkcs12(input string) (string, error) { return fullPemToPkcs12Pass(input, "") }

// fullPemToPkcs12Pass is pemToPkcs12Pass for one PEM holding the key and the
// certificates.
func fullPemToPkcs12Pass(input, pass string) (string, error) {
	return pemToPkcs12Pass(input, input, pass)
}

// filterPEM returns the PEM blocks of type pemType (e.g. "CERTIFICATE",
// "PRIVATE KEY") found in input, in order.
func filterPEM(pemType, input string) (string, error) {
	var out bytes.Buffer
	rest := []byte(input)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type == pemType {
			if err := pem.Encode(&out, block); err != nil {
				return "", fmt.Errorf("filterPEM: %w", err)
			}
		}
	}
	if out.Len() == 0 {
		return "", fmt.Errorf("filterPEM: no %q block", pemType)
	}
	return out.String(), nil
}

// filterCertChain returns, from a PEM certificate chain, the "leaf" (the
// first certificate once ordered, unless it is a CA), the "intermediate"
// certificates (CAs that are not self-issued) or the "root" (the last, if
// self-issued), as PEM; empty when the chain has none.
func filterCertChain(certType, input string) (string, error) {
	certs, err := parseCerts(input)
	if err != nil {
		return "", fmt.Errorf("filterCertChain: %w", err)
	}
	chain := orderChain(certs)
	var picked []*x509.Certificate
	for i, c := range chain {
		selfIssued := bytes.Equal(c.RawSubject, c.RawIssuer)
		switch certType {
		case "leaf":
			if i == 0 && !c.IsCA {
				picked = append(picked, c)
			}
		case "intermediate":
			if c.IsCA && !selfIssued {
				picked = append(picked, c)
			}
		case "root":
			if i == len(chain)-1 && selfIssued {
				picked = append(picked, c)
			}
		default:
			return "", fmt.Errorf("filterCertChain: certificate type %q: want leaf, intermediate or root", certType)
		}
	}
	return encodeCerts(picked), nil
}

// jwkPublicKeyPem returns the public key of a JSON Web Key as a PEM PUBLIC
// KEY (PKIX).
func jwkPublicKeyPem(jwkJSON string) (string, error) {
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON([]byte(jwkJSON)); err != nil {
		return "", fmt.Errorf("jwkPublicKeyPem: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(k.Public().Key)
	if err != nil {
		return "", fmt.Errorf("jwkPublicKeyPem: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: pemPublicKey, Bytes: der})), nil
}

// jwkPrivateKeyPem returns the private key of a JSON Web Key as a PEM
// PRIVATE KEY (PKCS#8).
func jwkPrivateKeyPem(jwkJSON string) (string, error) {
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON([]byte(jwkJSON)); err != nil {
		return "", fmt.Errorf("jwkPrivateKeyPem: %w", err)
	}
	if k.IsPublic() {
		return "", errors.New("jwkPrivateKeyPem: the key is a public key")
	}
	der, err := x509.MarshalPKCS8PrivateKey(k.Key)
	if err != nil {
		return "", fmt.Errorf("jwkPrivateKeyPem: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der})), nil
}

// parseCerts returns every CERTIFICATE block of input, parsed.
func parseCerts(input string) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := []byte(input)
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

// parseKey returns the first private key of input: PKCS#8, PKCS#1 (RSA) or
// SEC 1 (EC).
func parseKey(input string) (any, error) {
	rest := []byte(input)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PRIVATE KEY block in the key")
		}
		switch block.Type {
		case pemPrivateKey:
			return x509.ParsePKCS8PrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			return x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			return x509.ParseECPrivateKey(block.Bytes)
		}
		if strings.HasSuffix(block.Type, "PRIVATE KEY") {
			return nil, fmt.Errorf("private key block %q not supported", block.Type)
		}
	}
}

// leafFirst moves the certificate of key's public key to the front (the
// archive's own certificate); the others follow as its CA certificates.
func leafFirst(certs []*x509.Certificate, key any) []*x509.Certificate {
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

// orderChain puts a chain in order: the leaf (the one certificate that
// issued none of the others), then its issuer, and so on; certificates it
// cannot place (several leaves, disjoint chains) keep their order after it.
func orderChain(certs []*x509.Certificate) []*x509.Certificate {
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

func encodeCerts(certs []*x509.Certificate) string {
	var out bytes.Buffer
	for _, c := range certs {
		out.Write(pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: c.Raw}))
	}
	return out.String()
}

// seededReader is a deterministic byte stream (SHA-256 in counter mode over
// a seed): PKCS#12 salts and IVs that depend only on the inputs.
type seededReader struct {
	seed [sha256.Size]byte
	ctr  uint64
	buf  []byte
}

func newSeededReader(parts ...string) *seededReader {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	r := &seededReader{}
	h.Sum(r.seed[:0])
	return r
}

func (r *seededReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.buf) == 0 {
			var block [sha256.Size + 8]byte
			copy(block[:], r.seed[:])
			binary.BigEndian.PutUint64(block[sha256.Size:], r.ctr)
			r.ctr++
			sum := sha256.Sum256(block[:])
			r.buf = sum[:]
		}
		c := copy(p[n:], r.buf)
		r.buf = r.buf[c:]
		n += c
	}
	return n, nil
}
