package tlsbundle

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
)

// encodeKeyDER parses the DER of a private key block, whatever its PEM type
// says (a "PRIVATE KEY" block holding PKCS#1, as some tools write it,
// parses too), and encodes it as encodeKey does.
func encodeKeyDER(der []byte) ([]byte, error) {
	key, err := parseKeyDER(der)
	if err != nil {
		return nil, err
	}
	return encodeKey(key)
}

// parseKeyDER tries PKCS#8, then PKCS#1, then SEC 1.
func parseKeyDER(der []byte) (any, error) {
	if key, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		return key, nil
	}
	if key, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return key, nil
	}
	if key, err := x509.ParseECPrivateKey(der); err == nil {
		return key, nil
	}
	return nil, errKeyUnparsable
}

// encodeKey encodes tls.key as the upstream driver does: an RSA key as
// PKCS#1 ("RSA PRIVATE KEY"), an ECDSA key as SEC 1 ("EC PRIVATE KEY"),
// whatever encoding the object used. The upstream driver refuses Ed25519
// keys; keymount writes them as PKCS#8 ("PRIVATE KEY"), their only PEM
// encoding. Other keys (X25519, for one, which cannot sign) are refused.
func encodeKey(key any) ([]byte, error) {
	var block *pem.Block
	switch k := key.(type) {
	case *rsa.PrivateKey:
		block = &pem.Block{Type: pemRSAKey, Bytes: x509.MarshalPKCS1PrivateKey(k)}
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, errKeyType
		}
		block = &pem.Block{Type: pemECKey, Bytes: der}
	case ed25519.PrivateKey:
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return nil, errKeyType
		}
		block = &pem.Block{Type: pemPKCS8Key, Bytes: der}
	default:
		return nil, errKeyType
	}
	return pem.EncodeToMemory(block), nil
}
