package vault

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/keymount/keymount/internal/vaultlogin"
	"github.com/keymount/keymount/provider/internal/mounttoken"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/provider/vault/spec"
)

// Defaults of Config.
const (
	DefaultReissueMargin = 10 * time.Minute
	DefaultVolumeIdle    = 10 * time.Minute
	DefaultMaintainEvery = 15 * time.Second
)

// Verifier proves the identity a mount's token names. *satoken.Verifier
// implements it.
type Verifier = mounttoken.Verifier

// Config configures the provider. Zero fields take the defaults.
type Config struct {
	// Address is Vault's address for classes without vaultAddress
	// (vault-csi-provider's -vault-addr).
	Address string
	// Defaults fill the parameters a class does not set
	// (vault-csi-provider's -vault-mount, -vault-namespace, -vault-tls-*).
	Defaults spec.Defaults
	// ReissueMargin: a lease (or the login it was issued with) that cannot
	// be renewed past its end is issued again this long before it ends, or
	// a third of its TTL before when that is sooner.
	ReissueMargin time.Duration
	// VolumeIdle: a volume not mounted or refreshed for this long is gone.
	VolumeIdle time.Duration
	// MaintainEvery is how often Run calls Maintain.
	MaintainEvery time.Duration
	Clock         clock.Clock
	// Observer counts requests to Vault (metrics); nil counts nothing.
	Observer Observer
}

func (c Config) withDefaults() Config {
	if c.ReissueMargin <= 0 {
		c.ReissueMargin = DefaultReissueMargin
	}
	if c.VolumeIdle <= 0 {
		c.VolumeIdle = DefaultVolumeIdle
	}
	if c.MaintainEvery <= 0 {
		c.MaintainEvery = DefaultMaintainEvery
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

// Provider serves Vault secrets behind the provider kit.
type Provider struct {
	cfg     Config
	tokens  Verifier
	clients clients
	obs     observer

	// logins by loginKey: created and swept with mu held, in step with busy.
	logins *vaultlogin.Cache

	mu      sync.Mutex
	slots   map[string]*slot
	volumes map[string]*volume // by volumeID and login key
	// kvVersions caches the KV version of pushes' paths.
	kvVersions kvVersions
	// busy counts the mounts in progress by login key: their login and
	// lease slots are in use before their volume is recorded.
	busy map[string]int
}

var (
	_ server.Provider    = (*Provider)(nil)
	_ server.Unpublisher = (*Provider)(nil)
	_ server.Pusher      = (*Provider)(nil)
)

// volume is what the provider knows of a mounted volume.
type volume struct {
	loginKey string
	slots    []string // its lease slots
	seen     time.Time
}

// New returns the Vault provider; tokens proves each mount's identity.
func New(cfg Config, tokens Verifier) (*Provider, error) {
	if tokens == nil {
		return nil, errors.New("vault provider needs a token verifier")
	}
	cfg = cfg.withDefaults()
	obs := observer{cfg.Observer}
	return &Provider{cfg: cfg, tokens: tokens, obs: obs, logins: newLogins(cfg, obs),
		slots: map[string]*slot{}, volumes: map[string]*volume{}, busy: map[string]int{}}, nil
}

// margin is how long before the end of something of ttl that cannot be
// renewed it is replaced.
func (p *Provider) margin(ttl time.Duration) time.Duration {
	return min(p.cfg.ReissueMargin, ttl/3)
}

// Mount proves the pod's identity with its token, logs in (or reuses the
// identity's login) and serves every object.
func (p *Provider) Mount(ctx context.Context, req *server.MountRequest) (*server.MountResult, error) {
	s, err := p.parse(p.cfg.Defaults.Parse(req.Attributes, req.Permission))
	if err != nil {
		return nil, err
	}
	l, sess, err := p.logIn(ctx, s)
	if err != nil {
		return nil, err
	}
	defer p.done(l)
	res := &server.MountResult{}
	vol := volumeID(req.TargetPath, s)
	var leases []string
	for i := range s.Objects {
		o := &s.Objects[i]
		f, leaseKey, err := p.object(ctx, s, l.Key(), sess, vol, o)
		if err != nil {
			return nil, err
		}
		if leaseKey != "" {
			leases = append(leases, leaseKey)
		}
		mode := o.Mode
		if mode == 0 {
			mode = s.Permission
		}
		if o.Extract != nil {
			keys, err := o.Extract.Extract(f.contents)
			if err != nil {
				return nil, fmt.Errorf("%w: object %q (vault path %s): extract: %w", server.ErrInvalidParameters, o.Name, o.Path, err)
			}
			res.Files = append(res.Files, server.DirFiles(o.Name, mode, keys)...)
		} else {
			res.Files = append(res.Files, server.File{Path: o.Name, Mode: mode, Contents: f.contents})
		}
		res.Versions = append(res.Versions, server.ObjectVersion{ID: o.Name, Version: f.version})
	}
	p.seen(vol, l.Key(), leases)
	return res, nil
}

// parse completes a parsed request: Vault's address is the provider's
// when the class gives none.
func (p *Provider) parse(s *spec.Spec, err error) (*spec.Spec, error) {
	if err != nil {
		return nil, fmt.Errorf("%w: %w", server.ErrInvalidParameters, err)
	}
	if s.Address == "" {
		s.Address = p.cfg.Address
	}
	if s.Address == "" {
		return nil, fmt.Errorf("%w: %s is empty and the provider has no --vault-addr: set the class's %s",
			server.ErrInvalidParameters, spec.KeyAddress, spec.KeyAddress)
	}
	return s, nil
}

// logIn proves the identity s names with its token, then returns its
// login entry, busy until done is called, and a usable session of it (the
// identity's login reused, or a new one). Mount and Push log in with it.
func (p *Provider) logIn(ctx context.Context, s *spec.Spec) (*vaultlogin.Login, *vaultlogin.Session, error) {
	if err := p.prove(ctx, s); err != nil {
		return nil, nil, err
	}
	base, err := p.clients.get(s.Address, s.VaultNamespace, s.TLS)
	if err != nil {
		return nil, nil, err
	}
	l := p.login(s)
	sess, err := p.session(ctx, l, base, s.Token)
	if err != nil {
		p.done(l)
		return nil, nil, err
	}
	return l, sess, nil
}

// login returns the login entry of s's identity, busy until done is
// called: neither it nor its leases are let go of meanwhile.
func (p *Provider) login(s *spec.Spec) *vaultlogin.Login {
	key := loginKey(s.Address, s)
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.logins.Get(key, vaultlogin.Identity{Path: "auth/" + s.AuthMount + "/login", Role: s.Role})
	p.busy[key]++
	return l
}

// done ends a mount's use of l that login began.
func (p *Provider) done(l *vaultlogin.Login) {
	key := l.Key()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.busy[key]--; p.busy[key] <= 0 {
		delete(p.busy, key)
	}
}

// seen records that the volume vol (volumeID) was mounted or refreshed
// now by loginKey's identity. Each identity's record is its own: one
// SecretSync's never replaces another identity's at the same path.
func (p *Provider) seen(vol, loginKey string, leases []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.volumes[vol+"|"+loginKey] = &volume{loginKey: loginKey, slots: leases, seen: p.cfg.Clock.Now()}
}

// slot returns the slot of key, creating it.
func (p *Provider) slot(key, loginKey string) *slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	sl, ok := p.slots[key]
	if !ok {
		sl = &slot{loginKey: loginKey}
		p.slots[key] = sl
	}
	return sl
}
