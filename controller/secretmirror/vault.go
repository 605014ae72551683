package secretmirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/internal/vaultkv"
	"github.com/keymount/keymount/internal/vaultlogin"
	"github.com/keymount/keymount/internal/vaultmsg"
)

// vaultReader reads the Vault secrets of SecretMirrors with a Vault source
// and holds what every Vault call of the reconciler shares: one client per
// address and one login cache (internal/vaultlogin), so a SecretMirror logs
// in once per token lifetime, whether it reads, writes or both. It keeps,
// per SecretMirror, the last value read and its KV version 2 version, so an
// unchanged secret costs one metadata read, or the lease of a dynamic
// secret, renewed instead of read again.
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
	// leaseID of a renewable lease (dynamic secrets), renewed instead of
	// read again, and its TTL in seconds.
	leaseID       string
	leaseDuration int
	// secretType is the type a push recorded (vaultkv.MetadataSecretType).
	secretType corev1.SecretType
	data       map[string][]byte
}

func newVaultReader(live client.Reader, tokens TokenSource, audiences []string) *vaultReader {
	return &vaultReader{live: live, tokens: tokens, audiences: audiences, logins: newLogins(),
		clients: map[string]*vaultapi.Client{}, reads: map[types.NamespacedName]*kvRead{}}
}

// vaultValue is what read returns: the secret's fields, type and version
// (the copies' parent-version), and its lease.
type vaultValue struct {
	data       map[string][]byte
	secretType corev1.SecretType
	version    string
	lease      *mirrorsv1alpha2.VaultSourceStatus
	// renewed: the lease was renewed, not read again; issued: a new
	// lease was taken.
	renewed, issued bool
}

// withVault runs op with a client of vs.Addr carrying the token of
// vs.Auth's login (field names vs in errors). When Vault refuses a cached
// login's token (revoked, policy changed), op runs once more after a new
// login.
func (v *vaultReader) withVault(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, vs *mirrorsv1alpha2.VaultSpec, field string,
	op func(c *vaultapi.Client, l *vaultLogin) error) error {
	if vs == nil || vs.Addr == "" || vs.Path == "" {
		return fmt.Errorf("%w: %s.addr and %s.path are required", errVaultSpec, field, field)
	}
	base, err := v.client(vs.Addr, field)
	if err != nil {
		return err
	}
	l, err := v.resolveLogin(ctx, m, vs.Addr, vs.Auth, field+".auth")
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		token, err := v.vaultToken(ctx, base, l)
		if err != nil {
			return err
		}
		c, err := base.Clone()
		if err != nil {
			return err
		}
		c.SetToken(token)
		err = op(c, l)
		var re *vaultapi.ResponseError
		if attempt == 0 && errors.As(err, &re) && re.StatusCode == http.StatusForbidden && l.login != nil {
			v.forgetLogin(l)
			continue
		}
		return err
	}
}

// read returns the fields of m's Vault secret. A KV version 2 secret read
// before is confirmed by its metadata (current_version) and not read again
// while unchanged; a dynamic secret's lease is renewed while the renewal
// outlasts the poll period (until its max TTL), and re-issued only then.
// Errors name the path, who logged in and Vault's message.
func (v *vaultReader) read(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, period time.Duration) (vaultValue, error) {
	vs := m.Spec.Source.Vault
	var val vaultValue
	err := v.withVault(ctx, m, vs, "spec.source.vault", func(c *vaultapi.Client, l *vaultLogin) error {
		var err error
		val, err = v.readAs(ctx, c, l, m, strings.Trim(vs.Path, "/"), period)
		return err
	})
	return val, err
}

// readAs reads apiPath with c, which carries l's token.
func (v *vaultReader) readAs(ctx context.Context, c *vaultapi.Client, l *vaultLogin, m *mirrorsv1alpha2.SecretMirror, apiPath string, period time.Duration) (vaultValue, error) {
	key := client.ObjectKeyFromObject(m)
	v.mu.Lock()
	last := v.reads[key]
	v.mu.Unlock()
	addr := m.Spec.Source.Vault.Addr
	if last != nil && last.addr == addr && last.path == apiPath {
		renewed, err := v.unchanged(ctx, c, last, l, period)
		if err != nil {
			return vaultValue{}, err
		}
		if renewed {
			val := last.value()
			val.renewed = last.leaseID != ""
			return val, nil
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
	val := r.value()
	val.issued = r.leaseID != ""
	return val, nil
}

// seed gives v, after a restart, the value m's copies hold under the lease
// m's status names, so that lease is renewed rather than a new one taken.
func (v *vaultReader) seed(key types.NamespacedName, addr, apiPath string, lease *mirrorsv1alpha2.VaultSourceStatus, copyOf *corev1.Secret) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.reads[key] != nil {
		return
	}
	v.reads[key] = &kvRead{addr: addr, path: strings.Trim(apiPath, "/"), leaseID: lease.LeaseID, leaseDuration: lease.LeaseDuration,
		secretType: copyOf.Type, data: copyOf.Data}
}

// known tells whether v holds a value read for key.
func (v *vaultReader) known(key types.NamespacedName) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.reads[key] != nil
}

// errVaultNotFound: nothing at the path (a deleted or destroyed KV
// version 2 secret reads as nothing too).
var errVaultNotFound = errors.New("no secret at this path")

func (r *kvRead) value() vaultValue {
	val := vaultValue{data: r.data, secretType: r.secretType}
	if r.version > 0 {
		val.version = fmt.Sprint(r.version)
	}
	if r.leaseID != "" {
		val.lease = &mirrorsv1alpha2.VaultSourceStatus{LeaseID: r.leaseID, LeaseDuration: r.leaseDuration}
	}
	return val
}

// unchanged tells whether last is still current: a KV version 2 secret
// whose metadata's current_version is last's (its recorded type taken
// along), or a lease renewed for at least period. A version 1 secret is
// read again. A metadata read the token may not make reads the secret
// again.
func (v *vaultReader) unchanged(ctx context.Context, c *vaultapi.Client, last *kvRead, l *vaultLogin, period time.Duration) (bool, error) {
	switch {
	case last.leaseID != "":
		s, err := c.Sys().RenewWithContext(ctx, last.leaseID, last.leaseDuration)
		// Gone (an error), or at its max TTL before the next poll: a
		// new lease now, while the old one still holds.
		if renewed := err == nil && s != nil && time.Duration(s.LeaseDuration)*time.Second >= period; !renewed {
			return false, nil
		}
		v.mu.Lock()
		last.leaseDuration = s.LeaseDuration
		v.mu.Unlock()
		return true, nil
	case last.version == 0:
		return false, nil
	}
	mp, ok := vaultkv.MetadataPath(last.path)
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
	n, nerr := cur.Int64()
	if same := nerr == nil && int(n) == last.version; !same {
		return false, nil
	}
	v.mu.Lock()
	last.secretType = vaultkv.TypeOf(s.Data["custom_metadata"])
	v.mu.Unlock()
	return true, nil
}

// decodeKV reads the fields of a KV answer as mirrors does: data.data (KV
// version 2, or version 1 as mirrors writes it) or data (version 1, other
// engines); every field a string (or null, left out), decoded when it is standard base64
// (mirrors' Vault destination, and keymount's, write values so). A KV
// version 2 secret's type is the one a push recorded in its
// custom_metadata.
func decodeKV(s *vaultapi.Secret) (*kvRead, error) {
	fields := vaultkv.FieldsV1(s.Data)
	r := &kvRead{secretType: corev1.SecretTypeOpaque}
	if inner, ok := s.Data["data"].(map[string]any); ok {
		fields = inner
		if md, ok := s.Data["metadata"].(map[string]any); ok {
			if num, ok := md["version"].(json.Number); ok {
				if n, err := num.Int64(); err == nil {
					r.version = int(n)
				}
			}
			r.secretType = vaultkv.TypeOf(md["custom_metadata"])
		}
	} else if s.Renewable && s.LeaseID != "" {
		r.leaseID, r.leaseDuration = s.LeaseID, s.LeaseDuration
	}
	strs := make(map[string]any, len(fields))
	for k, val := range fields {
		switch val.(type) {
		case nil:
			// A field without a value (the AWS engine's security_token
			// of an IAM user): no key.
		case string:
			strs[k] = val
		default:
			return nil, fmt.Errorf("field %q is not a string (%T): a Secret's keys hold strings", k, val)
		}
	}
	r.data = vaultkv.Decode(strs).Data
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
func (v *vaultReader) client(addr, field string) (*vaultapi.Client, error) {
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
		return nil, fmt.Errorf("%w: %s.addr %q: %w", errVaultSpec, field, addr, err)
	}
	c.ClearToken()
	c.ClearNamespace()
	v.clients[addr] = c
	return c, nil
}

// vaultError says what failed, on which path, as whom, with Vault's own
// message (never a token: Vault's errors hold none, and the request's URL
// is left out). Vault's *vaultapi.ResponseError stays in the chain.
func vaultError(op, apiPath, role string, err error) error {
	return fmt.Errorf("%s %s as %s: %w", op, or(apiPath, "Vault"), role, vaultmsg.Refusal(err))
}
