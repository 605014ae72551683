package vault

import (
	"encoding/base64"
	"strings"
)

// base64Decode reads standard base64, padded or not.
func base64Decode(b []byte) ([]byte, error) {
	s := strings.TrimSpace(string(b))
	if out, err := base64.StdEncoding.DecodeString(s); err == nil {
		return out, nil
	}
	return base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
}
