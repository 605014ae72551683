package vault

import (
	"context"
	"strings"

	"k8s.io/klog/v2"

	"github.com/keymount/keymount/provider/server"
)

// Unpublish is keymount's driver telling that it unmounted a pod's volume
// (keymount's provider extension): the volume's record goes now, not when
// Maintain finds it idle; its leases are revoked when its class asks for
// it (revokeOnUnpublish), and its identity's login when it was the
// identity's last volume. A volume the provider does not know (already
// gone, served before a restart, a SecretSync's) is nothing to do. Vault
// failures are logged, not returned: the leases end with their TTL.
func (p *Provider) Unpublish(ctx context.Context, req *server.UnpublishRequest) error {
	vol := podVolumeID(req.PodUID, req.VolumeName)
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	n := 0
	for key := range p.volumes {
		if strings.HasPrefix(key, vol+"|") {
			delete(p.volumes, key)
			n++
		}
	}
	if n == 0 {
		p.mu.Unlock()
		klog.V(4).InfoS("unpublished volume not known; nothing to let go of", "podUID", req.PodUID, "volume", req.VolumeName)
		return nil
	}
	sw := p.sweepLocked()
	p.mu.Unlock()
	p.letGo(ctx, sw, now)
	klog.V(2).InfoS("volume unpublished", "podUID", req.PodUID, "volume", req.VolumeName,
		"leasesReleased", len(sw.unheld), "loginsRevoked", len(sw.gone))
	return nil
}
