package template

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"fmt"

	"github.com/keymount/keymount/internal/tlsbundle"

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
	return string(tlsbundle.EncodeCertificates(tlsbundle.OrderChain(certs))), nil
}

func pemToPkcs12(cert, key string) (string, error) { return pemToPkcs12Pass(cert, key, "") }

// pemToPkcs12Pass builds a PKCS#12 archive from a PEM certificate (chain,
// leaf first) and a PEM private key, and returns it base64-encoded.
func pemToPkcs12Pass(cert, key, pass string) (string, error) {
	certs, err := tlsbundle.ParseCertificates([]byte(cert))
	if err != nil {
		return "", fmt.Errorf("pemToPkcs12: %w", err)
	}
	if len(certs) == 0 {
		return "", safeErrorf("pemToPkcs12: no CERTIFICATE block in the certificate")
	}
	k, err := tlsbundle.ParsePrivateKey([]byte(key))
	if err != nil {
		return "", fmt.Errorf("pemToPkcs12: %w", err)
	}
	certs = tlsbundle.LeafFirst(certs, k)
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
		return "", safeErrorf("filterPEM: no %q block", pemType)
	}
	return out.String(), nil
}

// filterCertChain returns, from a PEM certificate chain, the "leaf" (the
// first certificate once ordered, unless it is a CA), the "intermediate"
// certificates (CAs that are not self-issued) or the "root" (the last, if
// self-issued), as PEM; empty when the chain has none.
func filterCertChain(certType, input string) (string, error) {
	certs, err := tlsbundle.ParseCertificates([]byte(input))
	if err != nil {
		return "", fmt.Errorf("filterCertChain: %w", err)
	}
	chain := tlsbundle.OrderChain(certs)
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
			return "", safeErrorf("filterCertChain: certificate type %q: want leaf, intermediate or root", certType)
		}
	}
	return string(tlsbundle.EncodeCertificates(picked)), nil
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
		return "", safeErrorf("jwkPrivateKeyPem: the key is a public key")
	}
	der, err := x509.MarshalPKCS8PrivateKey(k.Key)
	if err != nil {
		return "", fmt.Errorf("jwkPrivateKeyPem: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der})), nil
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
