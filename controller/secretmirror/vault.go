package secretmirror

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	vaultapi "github.com/hashicorp/vault/api"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/internal/vaultlogin"
	"github.com/keymount/keymount/internal/vaultmsg"
)

// vaultReader reads the KV secrets of SecretMirrors with a Vault source.
// It keeps, per SecretMirror, the last value read and its KV version 2
// version, so an unchanged secret costs one metadata read, and the Vault
// tokens of its logins (internal/vaultlogin), so a SecretMirror logs in
// once per token lifetime.
type vaultReader struct {
	live   client.Reader
	tokens TokenSource
	// audiences tokens may be asked for.
	audiences []string
	logins    *vaultlogin.Cache

	mu      sync.Mutex
	clients map[string]*vaultapi.Client
	reads   map[types.NamespacedName]*kvRead
}

// kvRead is the last value read for one SecretMirror.
type kvRead struct {
	// addr and path it was read from.
	addr, path string
	// version is the KV version 2 version (0 for version 1).
	version int
	// leaseID of a renewable lease (other engines), renewed instead of
	// read again.
	leaseID string
	data    map[string][]byte
}

func newVaultReader(live client.Reader, tokens TokenSource, audiences []string) *vaultReader {
	return &vaultReader{live: live, tokens: tokens, audiences: audiences, logins: newLogins(),
		clients: map[string]*vaultapi.Client{}, reads: map[types.NamespacedName]*kvRead{}}
}

// vaultValue is what read returns: the secret's fields and its version
// (the copies' parent-version).
type vaultValue struct {
	data    map[string][]byte
	version string
}

// read returns the fields of m's Vault secret. A KV version 2 secret read
// before is confirmed by its metadata (current_version) and not read again
// while unchanged. Errors name the path, who logged in and Vault's message.
func (v *vaultReader) read(ctx context.Context, m *mirrorsv1alpha2.SecretMirror) (vaultValue, error) {
	vs := m.Spec.Source.Vault
	if vs == nil || vs.Addr == "" || vs.Path == "" {
		return vaultValue{}, fmt.Errorf("%w: spec.source.vault.addr and spec.source.vault.path are required", errVaultSpec)
	}
	apiPath := strings.Trim(vs.Path, "/")
	c, err := v.client(vs.Addr)
	if err != nil {
		return vaultValue{}, err
	}
	l, err := v.resolveLogin(ctx, m, vs.Addr, vs.Auth)
	if err != nil {
		return vaultValue{}, err
	}
	val, err := v.readAs(ctx, c, l, m, apiPath)
	var re *vaultapi.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusForbidden && l.login != nil {
		// A cached token Vault no longer takes (revoked, policy
		// changed): log in again once.
		v.forgetLogin(l)
		val, err = v.readAs(ctx, c, l, m, apiPath)
	}
	return val, err
}

// readAs reads apiPath with l's token.
func (v *vaultReader) readAs(ctx context.Context, base *vaultapi.Client, l *vaultLogin, m *mirrorsv1alpha2.SecretMirror, apiPath string) (vaultValue, error) {
	token, err := v.vaultToken(ctx, base, l)
	if err != nil {
		return vaultValue{}, err
	}
	c, err := base.Clone()
	if err != nil {
		return vaultValue{}, err
	}
	c.SetToken(token)
	key := client.ObjectKeyFromObject(m)
	v.mu.Lock()
	last := v.reads[key]
	v.mu.Unlock()
	addr := m.Spec.Source.Vault.Addr
	if last != nil && last.addr == addr && last.path == apiPath {
		if ok, err := v.unchanged(ctx, c, last, l); err != nil {
			return vaultValue{}, err
		} else if ok {
			return last.value(), nil
		}
	}
	s, err := c.Logical().ReadWithContext(ctx, apiPath)
	if err != nil {
		return vaultValue{}, vaultError("read", apiPath, l.role, err)
	}
	if s == nil {
		return vaultValue{}, fmt.Errorf("read %s from %s as %s: %w", apiPath, addr, l.role, errVaultNotFound)
	}
	r, err := decodeKV(s)
	if err != nil {
		return vaultValue{}, fmt.Errorf("read %s from %s: %w", apiPath, addr, err)
	}
	r.addr, r.path = addr, apiPath
	v.mu.Lock()
	v.reads[key] = r
	v.mu.Unlock()
	return r.value(), nil
}

// errVaultNotFound: nothing at the path (a deleted or destroyed KV
// version 2 secret reads as nothing too).
var errVaultNotFound = errors.New("no secret at this path")

func (r *kvRead) value() vaultValue {
	val := vaultValue{data: r.data}
	if r.version > 0 {
		val.version = fmt.Sprint(r.version)
	}
	return val
}

// unchanged tells whether last is still current: a KV version 2 secret
// whose metadata's current_version is last's, or a renewable lease
// renewed. A version 1 secret is read again. A metadata read the token may
// not make reads the secret again.
func (v *vaultReader) unchanged(ctx context.Context, c *vaultapi.Client, last *kvRead, l *vaultLogin) (bool, error) {
	switch {
	case last.leaseID != "":
		_, err := c.Sys().RenewWithContext(ctx, last.leaseID, 0)
		return err == nil, nil
	case last.version == 0:
		return false, nil
	}
	mp, ok := metadataPath(last.path)
	if !ok {
		return false, nil
	}
	s, err := c.Logical().ReadWithContext(ctx, mp)
	var re *vaultapi.ResponseError
	switch {
	case errors.As(err, &re) && re.StatusCode == http.StatusForbidden:
		return false, nil
	case err != nil:
		return false, vaultError("read the metadata of", mp, l.role, err)
	case s == nil:
		return false, nil
	}
	cur, _ := s.Data["current_version"].(json.Number)
	n, err := cur.Int64()
	return err == nil && int(n) == last.version, nil
}

// metadataPath is the KV version 2 metadata path of a data path: its first
// "data" segment after the mount's first segment becomes "metadata".
func metadataPath(dataPath string) (string, bool) {
	segs := strings.Split(dataPath, "/")
	for i := 1; i < len(segs)-1; i++ {
		if segs[i] == "data" {
			segs[i] = "metadata"
			return strings.Join(segs, "/"), true
		}
	}
	return "", false
}

// decodeKV reads the fields of a KV answer as mirrors does: data.data (KV
// version 2) or data (version 1, other engines); every field a string,
// decoded when it is standard base64 (mirrors' Vault destination writes
// values so).
func decodeKV(s *vaultapi.Secret) (*kvRead, error) {
	fields := s.Data
	r := &kvRead{}
	if inner, ok := s.Data["data"].(map[string]any); ok {
		fields = inner
		if md, ok := s.Data["metadata"].(map[string]any); ok {
			if num, ok := md["version"].(json.Number); ok {
				if n, err := num.Int64(); err == nil {
					r.version = int(n)
				}
			}
		}
	} else if s.Renewable && s.LeaseID != "" {
		r.leaseID = s.LeaseID
	}
	r.data = make(map[string][]byte, len(fields))
	for k, val := range fields {
		str, ok := val.(string)
		if !ok {
			return nil, fmt.Errorf("field %q is not a string (%T): a Secret's keys hold strings", k, val)
		}
		if b, err := base64.StdEncoding.DecodeString(str); err == nil {
			r.data[k] = b
		} else {
			r.data[k] = []byte(str)
		}
	}
	return r, nil
}

// forget drops what v keeps for a SecretMirror that is gone.
func (v *vaultReader) forget(key types.NamespacedName) {
	v.mu.Lock()
	delete(v.reads, key)
	v.mu.Unlock()
}

// client returns the Vault client of addr, without any token: a token in
// the controller's environment (VAULT_TOKEN) is never used.
func (v *vaultReader) client(addr string) (*vaultapi.Client, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.clients[addr]; ok {
		return c, nil
	}
	cfg := vaultapi.DefaultConfig()
	if cfg.Error != nil {
		return nil, fmt.Errorf("the Vault client configuration: %w", cfg.Error)
	}
	cfg.Address = addr
	c, err := vaultapi.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: spec.source.vault.addr %q: %w", errVaultSpec, addr, err)
	}
	c.ClearToken()
	c.ClearNamespace()
	v.clients[addr] = c
	return c, nil
}

// vaultError says what failed, on which path, as whom, with Vault's own
// message (never a token: Vault's errors hold none, and the request's URL
// holds the path only). Vault's *vaultapi.ResponseError stays in the chain.
func vaultError(op, apiPath, role string, err error) error {
	var re *vaultapi.ResponseError
	if errors.As(err, &re) {
		err = refusal{re}
	}
	return fmt.Errorf("%s %s as %s: %w", op, or(apiPath, "Vault"), role, err)
}

// refusal is Vault's error answer as its status and messages.
type refusal struct{ re *vaultapi.ResponseError }

func (r refusal) Error() string {
	return fmt.Sprintf("Vault answered %d: %s", r.re.StatusCode, vaultmsg.Join(r.re.Errors))
}

func (r refusal) Unwrap() error { return r.re }
