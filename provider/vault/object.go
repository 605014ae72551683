package vault

import (
	"context"
	"fmt"
	"time"

	"github.com/keymount/keymount/internal/vaultlogin"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/provider/vault/spec"
)

// file is one object's contents and version.
type file struct {
	contents []byte
	version  string
}

// object serves o for the volume vol (volumeID): from its lease (renewed when
// due, issued again only when it must be), from the identity's KV value
// when its version did not change, or from a new request. leaseKey names
// the lease slot the volume holds, "" for a value without a lease.
func (p *Provider) object(ctx context.Context, s *spec.Spec, loginKey string, sess *vaultlogin.Session, vol string, o *spec.Object) (f file, leaseKey string, err error) {
	okey := objectKey(o)
	scope := "volume " + vol
	if s.Share {
		scope = "class " + s.Namespace + "/" + s.Class
	}
	leaseKey = scope + "|" + loginKey + "|" + okey
	lsl := p.slot(leaseKey, loginKey)
	lsl.mu.Lock()
	defer lsl.mu.Unlock()
	lsl.revokeGone, lsl.role = s.Revoke, s.Role
	if lsl.leased {
		if p.leaseUsable(ctx, lsl, s.Role, o) {
			f, err := fileOf(lsl, o)
			return f, leaseKey, err
		}
		p.obs.reissued()
	}
	valueKey := "value|" + loginKey + "|" + okey
	if !lsl.leased {
		if f, ok, err := p.unchangedValue(ctx, sess, valueKey, s.Role, o); ok || err != nil {
			return f, "", err
		}
	}
	p.obs.request(o.Method)
	ans, err := request(ctx, sess.Client(), o)
	if err != nil {
		p.obs.failure(o.Method)
		return file{}, "", vaultError(o.Method, o.Path, s.Role, err)
	}
	if p.storeLease(lsl, sess, ans, o) {
		f, err := fileOf(lsl, o)
		return f, leaseKey, err
	}
	p.dropSlot(leaseKey)
	vsl := p.slot(valueKey, loginKey)
	vsl.mu.Lock()
	defer vsl.mu.Unlock()
	vsl.ans = ans
	vsl.kvVersion, vsl.metaPath = "", ""
	if v, ok := ans.kv2(); ok {
		vsl.kvVersion, vsl.metaPath = v, metadataPath(o.Path)
	}
	f, err = fileOf(vsl, o)
	return f, "", err
}

// fileOf is o's file from the slot's answer.
func fileOf(sl *slot, o *spec.Object) (file, error) {
	b, err := value(sl.ans, o)
	if err != nil {
		return file{}, server.Mark(fmt.Errorf("object %q (vault path %s): %w", o.Name, o.Path, err), server.ErrNotFound)
	}
	v := sl.kvVersion
	if v == "" {
		v = contentVersion(b)
	}
	return file{contents: b, version: v}, nil
}

// unchangedValue serves a KV v2 value of the identity whose version is
// still current, after one metadata read. ok is false when the object must
// be read in full.
func (p *Provider) unchangedValue(ctx context.Context, sess *vaultlogin.Session, key, role string, o *spec.Object) (file, bool, error) {
	p.mu.Lock()
	vsl, exists := p.slots[key]
	p.mu.Unlock()
	if !exists {
		return file{}, false, nil
	}
	vsl.mu.Lock()
	defer vsl.mu.Unlock()
	if vsl.ans == nil || vsl.kvVersion == "" {
		return file{}, false, nil
	}
	if pinnedVersion(o.Path) {
		// A KV v2 version does not change.
		f, err := fileOf(vsl, o)
		return f, err == nil, err
	}
	if vsl.metaPath == "" {
		return file{}, false, nil
	}
	p.obs.request("metadata")
	meta, err := sess.Client().Logical().ReadWithContext(ctx, vsl.metaPath)
	if err != nil || meta == nil {
		p.obs.failure("metadata")
		// A policy written for vault-csi-provider may not grant the
		// metadata: read in full from now on.
		vsl.metaPath = ""
		return file{}, false, nil
	}
	if fmt.Sprint(meta.Data["current_version"]) != vsl.kvVersion {
		return file{}, false, nil
	}
	f, err := fileOf(vsl, o)
	return f, err == nil, err
}

// storeLease keeps ans in sl when it is leased: a Vault lease, or a
// certificate's expiration when Vault gave none. It reports whether it
// was.
func (p *Provider) storeLease(sl *slot, sess *vaultlogin.Session, ans *answer, o *spec.Object) bool {
	now := p.cfg.Clock.Now()
	ttl := time.Duration(ans.LeaseDuration) * time.Second
	switch {
	case ans.LeaseID != "":
		sl.expires = now.Add(ttl)
		sl.renewable = ans.Renewable
	case o.Method != spec.MethodGet:
		exp, ok := ans.expiration()
		if !ok {
			return false
		}
		sl.expires, ttl, sl.renewable = exp, exp.Sub(now), false
	default:
		return false
	}
	sl.leased, sl.ans, sl.session, sl.ttl = true, ans, sess, ttl
	sl.renewAt = now.Add(ttl * 2 / 3)
	sl.hardEnd = time.Time{}
	if !sl.renewable {
		sl.hardEnd = sl.expires
	}
	return true
}

// leaseUsable renews sl when due and tells whether it may still be served:
// neither it nor its login ends (for good) within the margin.
func (p *Provider) leaseUsable(ctx context.Context, sl *slot, role string, o *spec.Object) bool {
	now := p.cfg.Clock.Now()
	if sl.renewable && !now.Before(sl.renewAt) && now.Before(sl.expires) {
		p.renewLease(ctx, sl, role, o.Path)
	}
	if sl.session.Revoked() || !now.Before(sl.expires) {
		return false
	}
	end := sl.hardEnd
	if se := sl.session.LastEnd(); !se.IsZero() && (end.IsZero() || se.Before(end)) {
		end = se
	}
	return end.IsZero() || now.Before(end.Add(-p.margin(sl.ttl)))
}

// renewLease renews sl's lease by its TTL; a renewal granted less reveals
// its max TTL. A failed renewal leaves the lease as it is.
func (p *Provider) renewLease(ctx context.Context, sl *slot, role, path string) {
	p.obs.request("renew")
	sec, err := sl.session.Client().Sys().RenewWithContext(ctx, sl.ans.LeaseID, int(sl.ttl.Seconds()))
	if err != nil || sec == nil {
		p.obs.failure("renew")
		if err != nil {
			logRenewFailure(vaultError("renew", path, role, err))
		}
		return
	}
	now := p.cfg.Clock.Now()
	granted := time.Duration(sec.LeaseDuration) * time.Second
	sl.expires = now.Add(granted)
	sl.renewAt = now.Add(granted * 2 / 3)
	if granted < sl.ttl {
		sl.hardEnd = sl.expires
	}
}

func (p *Provider) dropSlot(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.slots, key)
}
