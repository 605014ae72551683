//go:build integration

package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/keymount/keymount/tests/promtext"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/internal/metrics"
	"github.com/keymount/keymount/tests/poll"
)

// TestBinaryMetricsBoundedByFoundProviders: any namespace editor can
// create SecretProviderClasses and SecretSyncs, so spec.provider is user
// input. 100 classes naming made-up providers, each synced once by a
// SecretSync, add no series to keymount-controller's /metrics: it has the
// same series after 100 as after one. The made-up names count under
// provider="(unknown)" and appear in no series; the provider whose socket
// the controller found keeps its name.
func TestBinaryMetricsBoundedByFoundProviders(t *testing.T) {
	env, _, c := startCluster(t)
	sockDir := serveLocalStore(t)
	kubeconfig, _ := env.KubeconfigFor(t, "keymount-controller", []string{"system:masters"})
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	startBinary(t, buildBinary(t), []string{
		"--kubeconfig=" + kubeconfig, "--provider-volume=" + sockDir, "--rotation-poll-interval=0s",
		"--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=" + probeAddr,
	}, syncrequest.EnvPodNamespace+"=keymount-system", syncrequest.EnvPodName+"=keymount-controller-0")
	poll.Until(t, "GET /readyz", func(ctx context.Context) (bool, error) {
		code, _ := get(ctx, "http://"+probeAddr+"/readyz")
		return code == http.StatusOK, nil
	})

	create(t, c, syncedClass("store", "local"), secretSync("db", "store"))
	poll.Until(t, "the Secret of the found provider", secretHolds(c, "app", "password", "from-the-store"))

	const classes = 100
	madeUp := func(i int) string {
		switch i % 10 {
		case 3:
			return fmt.Sprintf("made.up/%03d", i) // no socket can have this name
		case 7:
			return fmt.Sprintf("made-up-provider-with-a-long-name-%03d", i) // longer than a provider name may be
		}
		return fmt.Sprintf("made-up-%03d", i)
	}
	sync := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			name := fmt.Sprintf("made-up-%03d", i)
			create(t, c, syncedClass(name, madeUp(i)), secretSync(name, name))
		}
		poll.Until(t, fmt.Sprintf("SecretSyncs %d to %d failed on their made-up providers", from, to-1), func(ctx context.Context) (bool, error) {
			for i := from; i < to; i++ {
				var ss ss1.SecretSync
				if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: fmt.Sprintf("made-up-%03d", i)}, &ss); err != nil {
					return false, client.IgnoreNotFound(err)
				}
				if !slices.ContainsFunc(ss.Status.Conditions, func(c metav1.Condition) bool {
					// no socket: misconfigured; a name no socket can have: a provider error
					return c.Reason == ss1.ReasonSecretProviderClassMisconfigured || c.Reason == ss1.ReasonProviderError
				}) {
					return false, nil
				}
			}
			return true, nil
		})
	}

	sync(0, 1)
	afterOne := withoutOtherControllers(scrapeSeries(t, metricsAddr))
	sync(1, classes)
	afterAll := withoutOtherControllers(scrapeSeries(t, metricsAddr))

	if len(afterAll) != len(afterOne) {
		var added []string
		for _, s := range slices.Sorted(maps.Keys(afterAll)) {
			if _, ok := afterOne[s]; !ok {
				added = append(added, s)
			}
		}
		t.Errorf("/metrics has %d series after 1 class naming a made-up provider, %d after %d; new: %q",
			len(afterOne), len(afterAll), classes, added)
	}
	var unknownCalls, foundCalls float64
	for series, v := range afterAll {
		if strings.Contains(series, "made") {
			t.Errorf("a made-up provider labels a series: %s", series)
		}
		if strings.HasPrefix(series, "keymount_controller_provider_call_duration_seconds_count{") {
			switch {
			case strings.Contains(series, `provider="`+metrics.UnknownProvider+`"`):
				unknownCalls += v
			case strings.Contains(series, `provider="local"`):
				foundCalls += v
			}
		}
	}
	if unknownCalls < classes {
		t.Errorf("provider calls counted under provider=%q: %v, want at least %d (one per made-up class)", metrics.UnknownProvider, unknownCalls, classes)
	}
	if foundCalls < 1 {
		t.Errorf("provider calls counted under provider=\"local\": %v, want at least 1", foundCalls)
	}
}

// withoutOtherControllers drops controller-runtime's series of the
// controllers the classes do not reach (restart on change, the pod-status
// watch): those families are keyed by controller name, a fixed set, and a
// controller's appear at its first reconcile, whenever that comes (on a
// loaded machine, between the two scrapes). The secretsync controller's
// stay: the classes reach it.
func withoutOtherControllers(series map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for s, v := range series {
		perController := strings.HasPrefix(s, "controller_runtime_") || strings.HasPrefix(s, "workqueue_")
		if perController && !strings.Contains(s, `controller="secretsync"`) && !strings.Contains(s, `name="secretsync"`) &&
			(strings.Contains(s, `controller="`) || strings.Contains(s, `name="`)) {
			continue
		}
		out[s] = v
	}
	return out
}

// syncedClass is a class in "app" of provider with the local provider's
// object "password".
func syncedClass(name, provider string) *secretsstorev1.SecretProviderClass {
	return &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name},
		Spec: secretsstorev1.SecretProviderClassSpec{
			Provider: secretsstorev1.Provider(provider), Parameters: map[string]string{"objects": "- objectName: password\n"},
		},
	}
}

// secretSync is a SecretSync in "app" of class writing Secret name.
func secretSync(name, class string) *ss1.SecretSync {
	return &ss1.SecretSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name},
		Spec: ss1.SecretSyncSpec{SecretProviderClassName: class, ServiceAccountName: "app", SecretObject: ss1.SecretObject{
			Type: "Opaque", Data: []ss1.SecretObjectData{{SourcePath: "password", TargetKey: "password"}},
		}},
	}
}

// scrapeSeries reads keymount-controller's /metrics: every series as it
// prints it (name{labels}) and its value.
func scrapeSeries(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	code, body := get(t.Context(), "http://"+addr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	out, err := promtext.Series(body)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
