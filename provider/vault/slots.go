package vault

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/keymount/keymount/internal/vaultlogin"
	"github.com/keymount/keymount/provider/vault/spec"
)

// maxAnswer bounds the body of one Vault answer read.
const maxAnswer = 4 << 20

// answer is what Vault returned for an object's request.
type answer struct {
	raw           []byte         // the JSON body, written as is for an object without secretKey
	LeaseID       string         `json:"lease_id"`
	LeaseDuration int            `json:"lease_duration"`
	Renewable     bool           `json:"renewable"`
	Data          map[string]any `json:"data"`
}

// slot holds the last answer for one object of one identity (a KV value)
// or of one volume or workload (a lease).
type slot struct {
	mu       sync.Mutex
	loginKey string
	ans      *answer

	// a KV v2 value: its version and metadata path ("" when the metadata
	// may not be read)
	kvVersion string
	metaPath  string

	// a lease
	leased    bool
	session   *vaultlogin.Session
	ttl       time.Duration
	expires   time.Time
	renewAt   time.Time
	hardEnd   time.Time // zero: renewable, max not known yet
	renewable bool
	// revokeGone: revoke the lease once no volume holds it
	// (revokeOnUnpublish); role names the login in errors.
	revokeGone bool
	role       string
}

// objectKey names a request: method, path and arguments.
func objectKey(o *spec.Object) string {
	args, _ := json.Marshal(o.Args) // map keys are sorted
	return o.Method + " " + o.Path + " " + string(args)
}

// request sends o's request with cl and reads the answer.
func request(ctx context.Context, cl *vaultapi.Client, o *spec.Object) (*answer, error) {
	var resp *vaultapi.Response
	var err error
	p, query, _ := strings.Cut(o.Path, "?")
	if o.Method == spec.MethodGet {
		values, perr := url.ParseQuery(query)
		if perr != nil {
			return nil, fmt.Errorf("secretPath query: %w", perr)
		}
		for k, v := range o.Args {
			values.Add(k, fmt.Sprint(v))
		}
		resp, err = cl.Logical().ReadRawWithDataWithContext(ctx, p, values)
	} else {
		body, merr := json.Marshal(o.Args)
		if merr != nil {
			return nil, fmt.Errorf("secretArgs: %w", merr)
		}
		resp, err = cl.Logical().WriteRawWithContext(ctx, p, body)
	}
	if resp != nil {
		defer func() { _ = resp.Body.Close() }()
	}
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxAnswer {
		return nil, fmt.Errorf("the answer is larger than %d bytes", maxAnswer)
	}
	a := &answer{raw: raw}
	if len(raw) == 0 {
		return nil, errors.New("vault answered with no body (nothing at this path for this method?)")
	}
	if err := json.Unmarshal(raw, a); err != nil {
		return nil, fmt.Errorf("vault's answer is not JSON: %w", err)
	}
	return a, nil
}

// kv2 tells whether a is a KV version 2 read, and its version.
func (a *answer) kv2() (string, bool) {
	meta, ok := a.Data["metadata"].(map[string]any)
	if _, isMap := a.Data["data"].(map[string]any); !ok || !isMap {
		return "", false
	}
	switch v := meta["version"].(type) {
	case float64:
		return strconv.FormatInt(int64(v), 10), true
	default:
		return "", false
	}
}

// expiration is a PKI certificate's end (data.expiration, Unix seconds)
// when Vault gave no lease for it.
func (a *answer) expiration() (time.Time, bool) {
	if v, ok := a.Data["expiration"].(float64); ok && v > 0 {
		return time.Unix(int64(v), 0), true
	}
	return time.Time{}, false
}

// metadataPath turns a KV v2 data path (<mount>/data/<name>) into its
// metadata path.
func metadataPath(p string) string {
	p, _, _ = strings.Cut(p, "?")
	i := strings.Index(p, "/data/")
	if i < 0 {
		return ""
	}
	return p[:i] + "/metadata/" + p[i+len("/data/"):]
}

// value is the file contents of o from a: the secretKey's value (under
// data.data for KV v2), or the whole answer without secretKey, decoded as
// o.Encoding says.
func value(a *answer, o *spec.Object) ([]byte, error) {
	var b []byte
	switch {
	case o.Extract != nil:
		// The secret's fields, as one JSON object: extract splits it.
		data := a.Data
		if _, isKV2 := a.kv2(); isKV2 {
			data, _ = a.Data["data"].(map[string]any)
		}
		return json.Marshal(data)
	case o.Key == "":
		b = a.raw
	default:
		data := a.Data
		if _, isKV2 := a.kv2(); isKV2 {
			data, _ = a.Data["data"].(map[string]any)
		}
		v, ok := data[o.Key]
		if !ok {
			return nil, fmt.Errorf("secretKey %q is not in the secret's data", o.Key)
		}
		if s, isString := v.(string); isString {
			b = []byte(s)
		} else {
			var err error
			if b, err = json.Marshal(v); err != nil {
				return nil, err
			}
		}
	}
	return decode(b, o.Encoding)
}

func decode(b []byte, encoding string) ([]byte, error) {
	switch encoding {
	case spec.EncodingBase64:
		out, err := base64Decode(b)
		if err != nil {
			return nil, fmt.Errorf("encoding base64: the value is not base64: %w", err)
		}
		return out, nil
	case spec.EncodingHex:
		out, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("encoding hex: the value is not hex: %w", err)
		}
		return out, nil
	}
	return b, nil
}

// contentVersion versions a value that has no version of its own.
func contentVersion(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// pinnedVersion tells whether a KV v2 path asks for one version
// (secret/data/app?version=3).
func pinnedVersion(p string) bool {
	_, query, ok := strings.Cut(p, "?")
	if !ok {
		return false
	}
	v, err := url.ParseQuery(query)
	return err == nil && v.Get("version") != ""
}
