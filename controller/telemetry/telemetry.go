// Package telemetry registers keymount-controller's own metrics, every
// one of them, on one registry: the SecretSync reconciler's
// (controller/secretsync) and the fan-out writers' (controller/fanout,
// reflector's annotations and SecretMirrors). keymount-controller calls
// Register with controller-runtime's registry; docs/metrics_test.go calls
// it too, so that the metrics the docs name are the binary's.
package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/secretsync"
)

// Metrics are keymount-controller's own metrics.
type Metrics struct {
	SecretSync *secretsync.Metrics
	Fanout     *fanout.Metrics
}

// Register registers every metric of keymount-controller's own with reg.
func Register(reg prometheus.Registerer) (*Metrics, error) {
	ss, err := secretsync.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	fo, err := fanout.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Metrics{SecretSync: ss, Fanout: fo}, nil
}
