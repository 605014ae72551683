package bench_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/keymount/keymount/tests/k8senv"
)

// BenchmarkFanoutFloor measures what the API server itself needs for the
// writes of one source change reaching $KEYMOUNT_BENCH_FANOUT_NAMESPACES
// (1,000) copies, with no controller at all: a plain client changes the
// data of one TLS-sized Secret in each namespace, fanoutWrites requests in
// flight and no client-side rate limit, once per way of writing:
//
//   - merge-patch-s: a JSON merge patch of the data, answered with the
//     object's metadata only (the least the API server can be asked);
//   - apply-s: a server-side apply of data, type, labels and annotations
//     (what keymount's fan-out writer sends), answered with metadata only;
//   - apply-full-s: the same apply answered with the whole object.
//
// Each figure has a -cpu-s twin: the CPU time kube-apiserver and etcd used
// meanwhile. BenchmarkFanout's change-s can come no lower than these on
// the same machine.
func BenchmarkFanoutFloor(b *testing.B) {
	namespaces := envInt(b, envFanoutNamespaces, defaultFanoutNamespaces)
	dir := b.TempDir()
	// Own control plane: the benchmark measures the CPU time of the control plane's processes (found by Options.Dir), only its own work.
	env := k8senv.Start(b, k8senv.Options{Dir: dir})
	cfg := *env.Config
	cfg.QPS, cfg.Burst = -1, 0
	cs := kubernetes.NewForConfigOrDie(&cfg)
	md := metadata.NewForConfigOrDie(&cfg)
	setupFloor(b, cs, namespaces)
	secrets := md.Resource(corev1.SchemeGroupVersion.WithResource("secrets"))
	full := cs.CoreV1().RESTClient()
	proto := cfg
	proto.ContentType = "application/vnd.kubernetes.protobuf"
	csProto := kubernetes.NewForConfigOrDie(&proto)
	rvs := &floorVersions{}
	modes := []struct {
		name  string
		write func(ctx context.Context, ns string, round int) error
	}{
		{"merge-patch", func(ctx context.Context, ns string, round int) error {
			_, err := secrets.Namespace(ns).Patch(ctx, fanoutSource, types.MergePatchType, floorMergePatch(round), metav1.PatchOptions{FieldManager: "floor"})
			return err
		}},
		{"apply", func(ctx context.Context, ns string, round int) error {
			_, err := secrets.Namespace(ns).Patch(ctx, fanoutSource, types.ApplyPatchType, floorApply(round), metav1.PatchOptions{FieldManager: "floor", Force: new(true)})
			return err
		}},
		{"apply-full", func(ctx context.Context, ns string, round int) error {
			return full.Patch(types.ApplyPatchType).Namespace(ns).Resource("secrets").Name(fanoutSource).
				Param("fieldManager", "floor").Param("force", "true").Body(floorApply(round)).Do(ctx).Error()
		}},
		{"update-json", func(ctx context.Context, ns string, round int) error {
			_, err := cs.CoreV1().Secrets(ns).Update(ctx, floorSecret(ns, rvs.get(ns), round), metav1.UpdateOptions{FieldManager: "floor"})
			return err
		}},
		{"update-proto", func(ctx context.Context, ns string, round int) error {
			_, err := csProto.CoreV1().Secrets(ns).Update(ctx, floorSecret(ns, rvs.get(ns), round), metav1.UpdateOptions{FieldManager: "floor"})
			return err
		}},
	}
	b.ResetTimer()
	round := 0
	for range b.N {
		for _, m := range modes {
			round++
			rvs.load(b, md)
			cpu0 := controlPlaneCPU(b, dir)
			start := time.Now()
			err := parallel(namespaces, envInt(b, "KEYMOUNT_BENCH_FLOOR_WRITES", fanoutWrites), func(i int) error {
				return m.write(b.Context(), fanoutNamespace(i), round)
			})
			wall := time.Since(start)
			if err != nil {
				b.Fatalf("%s: %v", m.name, err)
			}
			cpu := controlPlaneCPU(b, dir) - cpu0
			b.ReportMetric(wall.Seconds(), m.name+"-s")
			b.ReportMetric(cpu, m.name+"-cpu-s")
			b.Logf("%-12s %d writes in %.2f s (%.0f a second), kube-apiserver + etcd %.2f CPU-s", m.name, namespaces, wall.Seconds(),
				float64(namespaces)/wall.Seconds(), cpu)
		}
	}
}

// fanoutWrites is the requests in flight of BenchmarkFanoutFloor, as many
// as keymount's reflector writes at once.
const fanoutWrites = 32

// setupFloor creates the namespaces, each with a copy-sized Secret.
func setupFloor(b *testing.B, cs *kubernetes.Clientset, namespaces int) {
	b.Helper()
	err := parallel(namespaces, fanoutWorkers, func(i int) error {
		ns := fanoutNamespace(i)
		ctx := context.Background()
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: fanoutSource}, Type: corev1.SecretTypeTLS, Data: fanoutData(),
		}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatalf("create %d namespaces and Secrets: %v", namespaces, err)
	}
}

// floorVersions holds each copy's resourceVersion, read before a round
// (as a controller has them in its cache), for the update modes.
type floorVersions struct{ byNS map[string]string }

func (v *floorVersions) load(b *testing.B, md metadata.Interface) {
	b.Helper()
	list, err := md.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).List(b.Context(),
		metav1.ListOptions{FieldSelector: "metadata.name=" + fanoutSource})
	if err != nil {
		b.Fatalf("list the copies: %v", err)
	}
	v.byNS = make(map[string]string, len(list.Items))
	for _, it := range list.Items {
		v.byNS[it.Namespace] = it.ResourceVersion
	}
}

func (v *floorVersions) get(ns string) string { return v.byNS[ns] }

// floorSecret is the whole copy as an update sends it: what floorApply
// sets, at resourceVersion rv.
func floorSecret(ns, rv string, round int) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: fanoutSource, Namespace: ns, ResourceVersion: rv,
			Labels: map[string]string{"fanout.keymount.io/copy": "floor"},
			Annotations: map[string]string{
				"floor/reflects": "fanout-src/" + fanoutSource, "floor/auto-reflects": "True",
				"floor/reflected-version": strconv.Itoa(round), "floor/reflected-at": time.Now().UTC().Format(time.RFC3339Nano),
			},
		},
		Type: corev1.SecretTypeTLS, Data: fanoutData(),
	}
}

// floorMergePatch is a merge patch of new data (the same for every copy).
func floorMergePatch(int) []byte {
	return floorJSON(map[string]any{"data": floorData()})
}

// floorApply is an apply configuration of a copy as keymount writes one:
// type, data, a label and four annotations.
func floorApply(round int) []byte {
	return floorJSON(map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": string(corev1.SecretTypeTLS), "data": floorData(),
		"metadata": map[string]any{
			"name":   fanoutSource,
			"labels": map[string]string{"fanout.keymount.io/copy": "floor"},
			"annotations": map[string]string{
				"floor/reflects": "fanout-src/" + fanoutSource, "floor/auto-reflects": "True",
				"floor/reflected-version": strconv.Itoa(round), "floor/reflected-at": time.Now().UTC().Format(time.RFC3339Nano),
			},
		},
	})
}

func floorData() map[string]string {
	out := map[string]string{}
	for k, v := range fanoutData() {
		out[k] = base64.StdEncoding.EncodeToString(v)
	}
	return out
}

func floorJSON(v any) []byte {
	body, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return body
}

// controlPlaneCPU is the CPU time so far of the processes whose command
// line names dir (k8senv's etcd and kube-apiserver, started in dir).
func controlPlaneCPU(b *testing.B, dir string) float64 {
	b.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		b.Fatal(err)
	}
	total, found := 0.0, 0
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(cmd), dir) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		if s, err := cpuSeconds(pid); err == nil {
			total += s
			found++
		}
	}
	if found == 0 {
		b.Fatalf("no control-plane process names %s", dir)
	}
	return total
}
