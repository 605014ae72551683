package rotation

import (
	"testing"
	"time"
)

func TestNodeDefaultsDue(t *testing.T) {
	last := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		n    NodeDefaults
		now  time.Time
		want bool
	}{
		{"off: never, however long ago", NodeDefaults{Enabled: false, Interval: time.Minute}, last.Add(24 * time.Hour), false},
		{"on, before the interval", NodeDefaults{Enabled: true, Interval: 2 * time.Minute}, last.Add(119 * time.Second), false},
		{"on, at the interval", NodeDefaults{Enabled: true, Interval: 2 * time.Minute}, last.Add(2 * time.Minute), true},
		{"on, interval 0: every republish", NodeDefaults{Enabled: true}, last, true},
		{"on, clock set back: due", NodeDefaults{Enabled: true, Interval: time.Minute}, last.Add(-time.Hour), true},
		{"off, clock set back", NodeDefaults{Enabled: false, Interval: time.Minute}, last.Add(-time.Hour), false},
	} {
		if got := tc.n.Due(last, tc.now); got != tc.want {
			t.Errorf("%s: Due = %v, want %v", tc.name, got, tc.want)
		}
	}
}
