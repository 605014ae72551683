package vault

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/keymount/keymount/internal/vaultlogin"
)

// Run calls Maintain every Config.MaintainEvery until ctx ends. Logins
// are not revoked when the provider stops: the mounted pods' leases would
// go with them.
func (p *Provider) Run(ctx context.Context) {
	t := time.NewTicker(p.cfg.MaintainEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.Maintain(ctx)
		}
	}
}

// Maintain forgets volumes idle for Config.VolumeIdle and the leases only
// they held, revokes (revoke-self, taking their leases along) the logins no
// volume uses any more, and renews the logins and leases in use that are
// due.
func (p *Provider) Maintain(ctx context.Context) {
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	for key, v := range p.volumes {
		if now.Sub(v.seen) >= p.cfg.VolumeIdle {
			delete(p.volumes, key)
		}
	}
	sw := p.sweepLocked()
	p.mu.Unlock()

	p.letGo(ctx, sw, now)
	for _, l := range sw.live {
		l.RenewDue(ctx)
	}
	for _, sl := range sw.renew {
		p.renewDueLease(ctx, sl, now)
	}
}

// sweep is what sweepLocked found.
type sweep struct {
	gone   []*vaultlogin.Login // no volume uses them: forgotten, to revoke
	live   []*vaultlogin.Login
	unheld []*slot // leases no volume holds: forgotten, revoked first when their class asks
	renew  []*slot // leases volumes hold
}

// sweepLocked forgets the logins no recorded volume and no mount in
// progress uses, their slots, and the leases no volume holds. p.mu is
// held.
func (p *Provider) sweepLocked() sweep {
	usedLogins := map[string]bool{}
	usedSlots := map[string]bool{}
	for k := range p.busy {
		usedLogins[k] = true
	}
	for _, v := range p.volumes {
		usedLogins[v.loginKey] = true
		for _, k := range v.slots {
			usedSlots[k] = true
		}
	}
	var sw sweep
	sw.gone, sw.live = p.logins.Sweep(func(k string) bool { return usedLogins[k] })
	for k, sl := range p.slots {
		switch {
		case !usedLogins[sl.loginKey]:
			delete(p.slots, k)
			if !isValueKey(k) {
				// Its login's revocation takes it along, in Vault's
				// own time; revokeOnUnpublish revokes it first.
				sw.unheld = append(sw.unheld, sl)
			}
		case usedSlots[k]:
			sw.renew = append(sw.renew, sl)
		case p.busy[sl.loginKey] > 0:
			// perhaps a mount in progress is filling it
		case !isValueKey(k):
			delete(p.slots, k) // a lease no volume holds
			sw.unheld = append(sw.unheld, sl)
		}
	}
	return sw
}

// letGo revokes what a sweep forgot: the logins (revoke-self, taking
// their leases along), and the leases of classes that ask for it.
func (p *Provider) letGo(ctx context.Context, sw sweep, now time.Time) {
	for _, sl := range sw.unheld {
		p.revokeUnheld(ctx, sl, now)
	}
	for _, l := range sw.gone {
		l.Revoke(ctx)
	}
}

func isValueKey(k string) bool { return len(k) > 6 && k[:6] == "value|" }

func (p *Provider) renewDueLease(ctx context.Context, sl *slot, now time.Time) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.leased && sl.renewable && !now.Before(sl.renewAt) && now.Before(sl.expires) && !sl.session.Revoked() {
		p.renewLease(ctx, sl, "", "sys/leases/renew")
	}
}

// revokeUnheld revokes the lease of a slot no volume holds any more when
// its class asks for it (revokeOnUnpublish); any other lease ends with its
// TTL.
func (p *Provider) revokeUnheld(ctx context.Context, sl *slot, now time.Time) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if !sl.revokeGone || !sl.leased || sl.ans.LeaseID == "" || sl.session.Revoked() || !now.Before(sl.expires) {
		return
	}
	sl.leased = false
	p.obs.request("revoke")
	if err := sl.session.Client().Sys().RevokeWithContext(ctx, sl.ans.LeaseID); err != nil {
		p.obs.failure("revoke")
		klog.InfoS("revoking the lease of an unpublished volume failed; it ends with its TTL (does the role's policy grant update on sys/leases/revoke?)",
			"err", vaultError("revoke", "sys/leases/revoke", sl.role, err))
	}
}

func logRenewFailure(err error) {
	klog.V(2).InfoS("renewing a vault lease failed; it is issued again before it ends", "err", err)
}
