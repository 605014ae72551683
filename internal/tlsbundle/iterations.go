package tlsbundle

import (
	"encoding/asn1"
	"errors"
	"math/big"
)

// maxPKCS12Iterations bounds the key derivation iterations of a PKCS#12
// archive. Decoding costs time in proportion to them and the library takes
// any count, so an archive asking for 2^31 iterations would hold a sync for
// hours. Real archives use 1 to 600,000 (OWASP's advice for PBKDF2-SHA256).
const maxPKCS12Iterations = 1_000_000

// maxDERDepth bounds how deep checkIterations looks; real archives nest
// about 16 levels.
const maxDERDepth = 48

// errTooManyIterations: an archive asks for more iterations than allowed.
var errTooManyIterations = errors.New("the PKCS#12 archive asks for more than 1,000,000 key derivation iterations")

// checkIterations looks for iteration counts in PKCS#12 DER that the
// decoder would honour, before it does: an INTEGER right after an OCTET
// STRING in one SEQUENCE, which is how MacData {mac, macSalt, iterations},
// PBEParameter {salt, iterations} and PBKDF2-params {salt, iterationCount,
// ...} all look. It looks into OCTET STRINGs that hold DER (the
// authenticated safe, safe contents, bags) but cannot see into encrypted
// content. Data that is not DER passes: the decoder rejects it.
func checkIterations(der []byte) error {
	return walkDER(der, 0)
}

// walkDER checks a list of sibling elements that must be DER throughout.
func walkDER(der []byte, depth int) error {
	if depth > maxDERDepth {
		return errPKCS12Unsupported
	}
	elems, ok := parseDER(der)
	if !ok {
		return nil // not DER: nothing the decoder would iterate on
	}
	for i, v := range elems {
		if i > 0 && isUniversal(elems[i-1], asn1.TagOctetString) && isUniversal(v, asn1.TagInteger) && tooMany(v.Bytes) {
			return errTooManyIterations
		}
		if v.IsCompound || isUniversal(v, asn1.TagOctetString) {
			if err := walkDER(v.Bytes, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseDER splits der into its elements; false when it is not DER throughout.
func parseDER(der []byte) ([]asn1.RawValue, bool) {
	var elems []asn1.RawValue
	for len(der) > 0 {
		var v asn1.RawValue
		rest, err := asn1.Unmarshal(der, &v)
		if err != nil {
			return nil, false
		}
		elems = append(elems, v)
		der = rest
	}
	return elems, true
}

func isUniversal(v asn1.RawValue, tag int) bool {
	return v.Class == asn1.ClassUniversal && v.Tag == tag && !v.IsCompound
}

// tooMany reports whether a DER INTEGER's content exceeds the limit.
func tooMany(content []byte) bool {
	n := new(big.Int).SetBytes(content)
	if len(content) > 0 && content[0]&0x80 != 0 {
		return false // negative: the decoder refuses it
	}
	return n.Cmp(big.NewInt(maxPKCS12Iterations)) > 0
}
