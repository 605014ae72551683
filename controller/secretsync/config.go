package secretsync

import (
	"errors"
	"fmt"
	"time"

	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/rotation"
)

// FieldManager is the server-side apply field manager of the Secrets the
// controller writes.
const FieldManager = "keymount-controller"

// Defaults of Config.
const (
	// DefaultPollInterval is the sync controller's --rotation-poll-interval.
	DefaultPollInterval = 12 * time.Hour
	// DefaultSyncBackoffInitial and DefaultSyncBackoffMax space the retries of a
	// failing sync: 10 s after the first failure, doubling up to 10 min.
	DefaultSyncBackoffInitial = 10 * time.Second
	DefaultSyncBackoffMax     = 10 * time.Minute
)

// Config is what the reconciler is told by its flags.
type Config struct {
	// Audiences are the token audiences (--token-request-audience); none
	// sends no tokens.
	Audiences []string
	// Pod is the controller's own pod, named in the request's pod keys.
	Pod syncrequest.Pod
	// PollInterval is the default refresh interval of a SecretSync
	// (--rotation-poll-interval); 0 refreshes only on a trigger, as the
	// sync controller's 0s disables polling.
	PollInterval time.Duration
	// Backoff spaces the retries of a failing sync; zero fields take the
	// defaults.
	Backoff rotation.Backoff
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.PollInterval < 0 {
		return c, fmt.Errorf("secretsync: the poll interval %s is negative: use 0 (no periodic refresh) or more", c.PollInterval)
	}
	if c.Backoff.Initial == 0 {
		c.Backoff.Initial = DefaultSyncBackoffInitial
	}
	if c.Backoff.Max == 0 {
		c.Backoff.Max = DefaultSyncBackoffMax
	}
	if c.Backoff.Initial < 0 || c.Backoff.Max < c.Backoff.Initial {
		return c, errors.New("secretsync: the backoff needs 0 < initial <= max")
	}
	for _, a := range c.Audiences {
		if a == "" {
			return c, errors.New("secretsync: an empty token audience: drop it from --token-request-audience")
		}
	}
	return c, nil
}

// policyDefaults are the rotation defaults the poll interval gives.
func (c Config) policyDefaults() rotation.NodeDefaults {
	return rotation.NodeDefaults{Enabled: c.PollInterval > 0, Interval: c.PollInterval}
}
