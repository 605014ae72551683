// Package telemetry registers keymount-controller's own metrics, every
// one of them, on one registry: the SecretSync reconciler's
// (controller/secretsync), the fan-out writers' (controller/fanout,
// reflector's annotations and SecretMirrors) and the pushes to stores
// (controller/push). keymount-controller calls
// Register with controller-runtime's registry; docs/metrics_test.go calls
// it too, so that the metrics the docs name are the binary's.
package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/push"
	"github.com/keymount/keymount/controller/secretsync"
)

// Metrics are keymount-controller's own metrics.
type Metrics struct {
	SecretSync *secretsync.Metrics
	Fanout     *fanout.Metrics
	Push       *push.Metrics
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
	pm, err := push.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Metrics{SecretSync: ss, Fanout: fo, Push: pm}, nil
}
