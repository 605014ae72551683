package driver

import (
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

func TestTokensExpire(t *testing.T) {
	soon := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	later := soon.Add(time.Hour)
	for _, tc := range []struct {
		name, attr string
		want       time.Time
	}{
		{"no tokens: held until the volume goes", "", time.Time{}},
		{"the first of several", `{"a":{"token":"x","expirationTimestamp":"` + later.Format(time.RFC3339) + `"},"b":{"token":"y","expirationTimestamp":"` + soon.Format(time.RFC3339) + `"}}`, soon},
		{"unreadable: expired", `{"a":`, time.Unix(1, 0)},
		{"no expiry: expired", `{"a":{"token":"x"}}`, time.Unix(1, 0)},
	} {
		if got := tokensExpire(tc.attr); !got.Equal(tc.want) {
			t.Errorf("%s: tokensExpire = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestHeldRequestExpiresWithItsTokens: a held request expires with its
// tokens wherever kubelet put them: the volume context, or the secrets
// (serviceAccountTokenInSecrets).
func TestHeldRequestExpiresWithItsTokens(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	tokens := `{"aud":{"token":"x","expirationTimestamp":"` + at.Format(time.RFC3339) + `"}}`
	for name, req := range map[string]*csi.NodePublishVolumeRequest{
		"volume context": {VolumeContext: map[string]string{AttrTokens: tokens}},
		"secrets":        {Secrets: map[string]string{AttrTokens: tokens}},
	} {
		h := heldRequests{m: map[string]*heldRequest{}}
		h.hold(&publishRequest{volumeID: "v"}, req)
		if got := h.m["v"].expires; !got.Equal(at) {
			t.Errorf("tokens in the %s: the held request expires %v, want %v", name, got, at)
		}
	}
}

func TestSweepDropsExpiredRequests(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	h := heldRequests{m: map[string]*heldRequest{
		"expired": {req: &csi.NodePublishVolumeRequest{}, expires: now.Add(-time.Second)},
		"valid":   {req: &csi.NodePublishVolumeRequest{}, expires: now.Add(time.Minute)},
		"none":    {req: &csi.NodePublishVolumeRequest{}},
		"running": {req: &csi.NodePublishVolumeRequest{}, expires: now.Add(-time.Second), running: true},
	}}
	if n := h.sweep(now); n != 1 {
		t.Errorf("sweep dropped %d, want 1", n)
	}
	for _, id := range []string{"valid", "none", "running"} {
		if _, ok := h.m[id]; !ok {
			t.Errorf("%s was dropped", id)
		}
	}
	if _, ok := h.m["expired"]; ok {
		t.Error("the expired request is still held")
	}
}
