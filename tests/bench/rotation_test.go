package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/harness"
)

// rotationScale compresses time: kubelet's republish about every minute
// becomes one a second and the 2-minute interval 2 s, so a minute of the
// benchmark is an hour of a node.
const rotationScale = 60

// BenchmarkRotationHour: 200 volumes on one node (the real driver and local
// provider binaries against a real API server, pod statuses on), nothing
// changing in the store, rotation on at upstream's default 2-minute
// interval, kubelet republishing every volume every minute, for an hour of
// the node's time (compressed 1:60, see rotationScale). It reports the
// provider calls and the API writes the hour cost (by the local provider's
// call log; writes as changed pod statuses and events, the only objects the
// driver writes with sync off), then the time from a keymount.io/refresh
// trigger on the class to the new content in the first and in all 200
// volumes, with no republish.
func BenchmarkRotationHour(b *testing.B) {
	const (
		volumes  = 200
		interval = 2 * time.Minute / rotationScale
		cadence  = time.Minute / rotationScale
		hour     = time.Hour / rotationScale
	)
	dir := b.TempDir()
	driverBin, providerBin := buildBinaries(b, dir)
	n := startClusterNodeWith(b, driverBin, providerBin, false, []string{"-v=4"},
		"--enable-secret-rotation", "--rotation-poll-interval="+interval.String())
	providerLog := filepath.Join(n.dir, "provider.log")
	for range b.N {
		b.StopTimer()
		vols := n.newPods(b, volumes, benchClass)
		n.publishBy(b, 16, vols, nil)
		n.waitStatuses(b, volumes)
		before := n.apiState(b)
		calls := providerCalls(b, providerLog)

		b.StartTimer()
		end := time.Now().Add(hour)
		republish := time.NewTicker(cadence) // kubelet's cadence
		for time.Now().Before(end) {
			n.publishBy(b, 16, vols, nil)
			<-republish.C
		}
		republish.Stop()
		b.StopTimer()
		made := providerCalls(b, providerLog) - calls
		n.waitStatuses(b, volumes)
		writes := n.apiState(b).changedSince(before)
		b.ReportMetric(float64(made), "provider-calls/hour")
		b.ReportMetric(float64(writes), "api-writes/hour")

		first, all := n.triggerLatency(b, vols)
		b.ReportMetric(ms(first), "trigger-first-ms")
		b.ReportMetric(ms(all), "trigger-all-200-ms")
		n.settle(b, vols)
	}
}

// providerCalls counts the Mount calls the local provider answered (it
// logs each at -v=4).
func providerCalls(b *testing.B, log string) int {
	b.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Count(data, []byte(`"provider call"`))
}

// apiState is what the driver wrote into the API: the resourceVersion of
// every pod status and event of the namespace.
type apiState map[string]string

func (n *clusterNode) apiState(b *testing.B) apiState {
	b.Helper()
	st := apiState{}
	var statuses secretsstorev1.SecretProviderClassPodStatusList
	if err := n.ctrl.List(b.Context(), &statuses, client.InNamespace(benchNamespace)); err != nil {
		b.Fatal(err)
	}
	for _, s := range statuses.Items {
		st["status/"+s.Name] = s.ResourceVersion
	}
	evs, err := n.kube.CoreV1().Events(benchNamespace).List(b.Context(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range evs.Items {
		st["event/"+e.Name] = e.ResourceVersion
	}
	return st
}

// changedSince counts the objects created or changed since before.
func (a apiState) changedSince(before apiState) int {
	changed := 0
	for k, rv := range a {
		if before[k] != rv {
			changed++
		}
	}
	return changed
}

// triggerLatency changes every object in the store, sets a new
// keymount.io/refresh value on the class, and returns how long until the
// first volume, and until every volume, shows the new content: no
// republish is sent.
func (n *clusterNode) triggerLatency(b *testing.B, vols []harness.Volume) (first, all time.Duration) {
	b.Helper()
	root := filepath.Join(n.dir, "root")
	newContent := randomBytes(objectSize)
	for i := range clusterObjects {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("object-%02d", i)), newContent, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, rotation.RefreshAnnotation, time.Now().Format(time.RFC3339Nano))
	spc := &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: benchClass}}
	start := time.Now()
	if err := n.ctrl.Patch(b.Context(), spc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		b.Fatal(err)
	}
	done := map[string]bool{}
	err := wait.PollUntilContextTimeout(b.Context(), time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		for _, v := range vols {
			if done[v.ID] {
				continue
			}
			got, err := os.ReadFile(filepath.Join(v.Target, "object-00"))
			if err == nil && bytes.Equal(got, newContent) {
				done[v.ID] = true
				if len(done) == 1 {
					first = time.Since(start)
				}
			}
		}
		return len(done) == len(vols), nil
	})
	if err != nil {
		b.Fatalf("%d of %d volumes got the new content within %s of the trigger: %v", len(done), len(vols), convergeTimeout, err)
	}
	return first, time.Since(start)
}
