package vault

import (
	"context"
	"time"

	"k8s.io/klog/v2"
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
	usedLogins := map[string]bool{}
	usedSlots := map[string]bool{}
	for key, v := range p.volumes {
		if now.Sub(v.seen) >= p.cfg.VolumeIdle {
			delete(p.volumes, key)
			continue
		}
		usedLogins[v.loginKey] = true
		for _, k := range v.slots {
			usedSlots[k] = true
		}
	}
	var gone, live []*login
	for k, l := range p.logins {
		if usedLogins[k] {
			live = append(live, l)
			continue
		}
		delete(p.logins, k)
		gone = append(gone, l)
	}
	var renew, unheld []*slot
	for k, sl := range p.slots {
		switch {
		case !usedLogins[sl.loginKey]:
			delete(p.slots, k)
		case usedSlots[k]:
			renew = append(renew, sl)
		case !isValueKey(k):
			delete(p.slots, k) // a lease no volume holds
			unheld = append(unheld, sl)
		}
	}
	p.mu.Unlock()

	for _, l := range gone {
		p.revoke(ctx, l)
	}
	for _, sl := range unheld {
		p.revokeUnheld(ctx, sl, now)
	}
	for _, l := range live {
		p.renewDue(ctx, l)
	}
	for _, sl := range renew {
		p.renewDueLease(ctx, sl, now)
	}
}

func isValueKey(k string) bool { return len(k) > 6 && k[:6] == "value|" }

func (p *Provider) renewDueLease(ctx context.Context, sl *slot, now time.Time) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.leased && sl.renewable && !now.Before(sl.renewAt) && now.Before(sl.expires) && !sl.session.revoked {
		p.renewLease(ctx, sl, "", "sys/leases/renew")
	}
}

// revokeUnheld revokes the lease of a slot no volume holds any more when
// its class asks for it (revokeOnUnpublish); any other lease ends with its
// TTL.
func (p *Provider) revokeUnheld(ctx context.Context, sl *slot, now time.Time) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if !sl.revokeGone || !sl.leased || sl.ans.LeaseID == "" || sl.session.revoked || !now.Before(sl.expires) {
		return
	}
	sl.leased = false
	p.obs.request("revoke")
	if err := sl.session.client.Sys().RevokeWithContext(ctx, sl.ans.LeaseID); err != nil {
		p.obs.failure("revoke")
		klog.InfoS("revoking the lease of an unpublished volume failed; it ends with its TTL (does the role's policy grant update on sys/leases/revoke?)",
			"err", vaultError("revoke", "sys/leases/revoke", sl.role, err))
	}
}

func logRenewFailure(err error) {
	klog.V(2).InfoS("renewing a vault lease failed; it is issued again before it ends", "err", err)
}
