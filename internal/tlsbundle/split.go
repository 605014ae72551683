package tlsbundle

import (
	"bytes"

	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"software.sslmate.com/src/go-pkcs12"
)

// The errors of splitting a TLS object. Their messages are fixed: they never
// carry a byte of the object, which is secret.
var (
	errNoCertificate      = errors.New("no CERTIFICATE block")
	errNoPrivateKey       = errors.New("no private key block (PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)")
	errSeveralPrivateKeys = errors.New("more than one private key block")
	errEncryptedKey       = errors.New("the private key is encrypted; keymount needs an unencrypted key")
	ErrNotTLS             = errors.New("neither PEM nor a PKCS#12 archive (DER, or base64 of it)")
	errPKCS12Password     = errors.New("the PKCS#12 archive has a password; keymount reads archives without one")
	errPKCS12Unsupported  = errors.New("the PKCS#12 archive uses an algorithm or content keymount cannot read")
	errPKCS12NoKey        = errors.New("the PKCS#12 archive has no private key")
	errPKCS12NoCert       = errors.New("the PKCS#12 archive has no certificate")
	errKeyUnparsable      = errors.New("the private key block holds no PKCS#8, PKCS#1 or SEC 1 private key")
	errKeyType            = errors.New("the private key is neither RSA, ECDSA nor Ed25519")
)

// PEM block types.
const (
	pemCertificate  = "CERTIFICATE"
	pemPKCS8Key     = "PRIVATE KEY"
	pemRSAKey       = "RSA PRIVATE KEY"
	pemECKey        = "EC PRIVATE KEY"
	pemEncryptedKey = "ENCRYPTED PRIVATE KEY"
)

// Pair is a TLS object split into PEM certificates and a PEM private key,
// encoded as encodeKey does.
type Pair struct {
	certs []byte // every certificate, leaf first; nil when there is none
	key   []byte // the private key; nil when keyErr is set
	// keyErr says why there is no usable key. It only matters to tls.key:
	// a certificate bundle without a key still fills tls.crt.
	keyErr error
}

// Part returns the content of key (tls.crt or tls.key) of a
// kubernetes.io/tls Secret split from an object's data (PEM or PKCS#12).
// Its errors never carry a byte of data.
func Part(data []byte, key string) ([]byte, error) {
	p, err := Split(data)
	if err != nil {
		return nil, err
	}
	return p.Part(key)
}

// Part returns the content of key (tls.crt or tls.key).
func (p Pair) Part(key string) ([]byte, error) {
	if key == corev1.TLSPrivateKeyKey {
		return p.key, p.keyErr
	}
	if len(p.certs) == 0 {
		return nil, errNoCertificate
	}
	return p.certs, nil
}

// Split splits a TLS object. Data with a PEM block is PEM: all
// CERTIFICATE blocks in order, and its one private key block. Anything else
// must be a PKCS#12 archive without password, raw or base64 (Azure Key Vault
// serves PFX certificates as base64).
func Split(data []byte) (Pair, error) {
	if block, _ := pem.Decode(data); block != nil {
		return splitPEM(data), nil
	}
	return splitPKCS12(data)
}

// splitPEM collects the certificates and the private key of PEM data. Other
// blocks (EC PARAMETERS, for one) are left out; headers are dropped.
func splitPEM(data []byte) Pair {
	var p Pair
	var keys int
	var keyDER []byte
	encrypted := false
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			break
		}
		data = rest
		switch block.Type {
		case pemCertificate:
			p.certs = append(p.certs, pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes})...)
		case pemPKCS8Key, pemRSAKey, pemECKey:
			keys++
			if strings.Contains(block.Headers["Proc-Type"], "ENCRYPTED") {
				encrypted = true
				continue
			}
			keyDER = block.Bytes
		case pemEncryptedKey:
			keys++
			encrypted = true
		}
	}
	switch {
	case keys > 1:
		p.keyErr = errSeveralPrivateKeys
	case encrypted:
		p.keyErr = errEncryptedKey
	case keys == 0:
		p.keyErr = errNoPrivateKey
	default:
		p.key, p.keyErr = encodeKeyDER(keyDER)
	}
	return p
}

// splitPKCS12 decodes a PKCS#12 archive without password, raw DER or base64.
func splitPKCS12(data []byte) (Pair, error) {
	key, leaf, chain, err := decodePKCS12(data)
	if err != nil && !errors.Is(err, errTooManyIterations) && !errors.Is(err, errPKCS12Unsupported) {
		der, ok := decodeBase64(data)
		if !ok {
			return Pair{}, err
		}
		key, leaf, chain, err = decodePKCS12(der)
	}
	if err != nil {
		return Pair{}, err
	}
	switch {
	case key == nil:
		return Pair{}, errPKCS12NoKey
	case leaf == nil:
		return Pair{}, errPKCS12NoCert
	}
	p := Pair{certs: EncodeCertificates(LeafFirst(append([]*x509.Certificate{leaf}, chain...), key))}
	p.key, p.keyErr = encodeKey(key)
	return p, nil
}

// decodePKCS12 decodes an archive without password once its iteration
// counts are known to be bounded.
func decodePKCS12(der []byte) (key any, leaf *x509.Certificate, chain []*x509.Certificate, err error) {
	if err := checkIterations(der); err != nil {
		return nil, nil, nil, err
	}
	key, leaf, chain, err = pkcs12.DecodeChain(der, "")
	if err != nil {
		return nil, nil, nil, pkcs12Error(err)
	}
	return key, leaf, chain, nil
}

// pkcs12Error turns a decoding error into one of the fixed errors: the
// library's messages are not ours to vouch for.
func pkcs12Error(err error) error {
	var notImplemented pkcs12.NotImplementedError
	switch {
	case errors.Is(err, pkcs12.ErrIncorrectPassword), errors.Is(err, pkcs12.ErrDecryption):
		return errPKCS12Password
	case errors.As(err, &notImplemented):
		return errPKCS12Unsupported
	default:
		return ErrNotTLS
	}
}

// decodeBase64 decodes standard base64, padded or not, ignoring whitespace.
func decodeBase64(data []byte) ([]byte, bool) {
	compact := bytes.Join(bytes.Fields(data), nil)
	if len(compact) == 0 {
		return nil, false
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		out := make([]byte, enc.DecodedLen(len(compact)))
		if n, err := enc.Decode(out, compact); err == nil {
			return out[:n], true
		}
	}
	return nil, false
}
