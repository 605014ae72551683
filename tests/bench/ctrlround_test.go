package bench_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	"github.com/keymount/keymount/tests/motoserver"
)

// roundResult is what one refresh round cost, scaled to exactly one
// refresh of every SecretSync.
type roundResult struct {
	// secretWrites and syncWrites are the Secrets and SecretSyncs whose
	// resourceVersion moved.
	secretWrites, syncWrites int
	// refreshes is the successful syncs the round counted.
	refreshes int
	// cpu and wall are seconds; store is Secrets Manager requests, sts the
	// other AWS requests (STS).
	cpu, wall, store, sts float64
}

// writes is every write the round made.
func (rr roundResult) writes() int { return rr.secretWrites + rr.syncWrites }

// refreshRound waits until the controller has refreshed as many
// SecretSyncs as there are (its poll interval makes them due; nothing
// changed in the store) and returns what that cost.
func (r *ctrlRun) refreshRound(b *testing.B, c *controllerProc) roundResult {
	b.Helper()
	pid := c.proc.Pid()
	before := r.versions(b)
	s0 := c.waitSyncs(b, "the counters before a round", func(syncCounts) bool { return true })
	cpu0, err := cpuSeconds(pid)
	if err != nil {
		b.Fatal(err)
	}
	var store0, sts0 int64
	if r.counter != nil {
		store0, sts0 = r.counter.store.Load(), r.counter.other.Load()
	}
	t0 := time.Now()
	want := float64(r.sc.syncs)
	s1 := c.waitSyncs(b, "a refresh round", func(s syncCounts) bool { return s["unchanged"]-s0["unchanged"] >= want })
	wall := time.Since(t0)
	cpu1, err := cpuSeconds(pid)
	if err != nil {
		b.Fatal(err)
	}
	res := roundResult{refreshes: int(s1.ok() - s0.ok())}
	scale := want / float64(res.refreshes)
	res.cpu = (cpu1 - cpu0) * scale
	res.wall = wall.Seconds() * scale
	if r.counter != nil {
		res.store = float64(r.counter.store.Load()-store0) * scale
		res.sts = float64(r.counter.other.Load()-sts0) * scale
	}
	after := r.versions(b)
	for k, v := range after {
		if before[k] != v {
			res.count(k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			res.count(k)
		}
	}
	if f := s1.failed() - s0.failed(); f > 0 {
		b.Errorf("%.0f syncs failed during a refresh round (counters %v)\n%s", f, s1, c.logTail())
	}
	return res
}

// refreshRounds measures n rounds in a row and returns their writes added
// up and their other figures averaged per round.
func (r *ctrlRun) refreshRounds(b *testing.B, c *controllerProc, n int) roundResult {
	b.Helper()
	var sum roundResult
	for i := range n {
		rr := r.refreshRound(b, c)
		b.Logf("  round %d of %d: store calls %.1f, STS calls %.1f, CPU %.2f s, %.1f s (%s)", i+1, n, rr.store, rr.sts, rr.cpu, rr.wall, rr)
		sum.secretWrites += rr.secretWrites
		sum.syncWrites += rr.syncWrites
		sum.refreshes += rr.refreshes
		sum.cpu += rr.cpu / float64(n)
		sum.wall += rr.wall / float64(n)
		sum.store += rr.store / float64(n)
		sum.sts += rr.sts / float64(n)
	}
	return sum
}

// count counts a write of the object versions names k.
func (rr *roundResult) count(k string) {
	if strings.HasPrefix(k, "SecretList/") {
		rr.secretWrites++
	} else {
		rr.syncWrites++
	}
}

// versions maps every SecretSync and labelled Secret of the benchmark
// namespace to its resourceVersion.
func (r *ctrlRun) versions(b *testing.B) map[string]string {
	b.Helper()
	out := map[string]string{}
	for _, kind := range []string{"SecretList", "SecretSyncList"} {
		list := r.list(b, kind, true)
		for _, o := range list.Items {
			out[kind+"/"+o.Name] = o.ResourceVersion
		}
	}
	return out
}

// count is how many objects of kind (SecretList or SecretSyncList) the
// benchmark namespace holds; Secrets with the controller's label only
// when labelled.
func (r *ctrlRun) count(b *testing.B, kind string, labelled bool) int {
	b.Helper()
	return len(r.list(b, kind, labelled).Items)
}

// listPage is the most objects a list reads at once: one list of 10,000
// timed out on a loaded API server.
const listPage = 500

// list reads the metadata of kind (SecretList or SecretSyncList) in the
// benchmark namespace, in pages of listPage.
func (r *ctrlRun) list(b *testing.B, kind string, labelled bool) *metav1.PartialObjectMetadataList {
	b.Helper()
	out := &metav1.PartialObjectMetadataList{}
	next := ""
	for {
		page := r.listPage(b, kind, labelled, next)
		out.Items = append(out.Items, page.Items...)
		if next = page.Continue; next == "" {
			return out
		}
	}
}

// listPage reads one page of list, from the continue token next.
func (r *ctrlRun) listPage(b *testing.B, kind string, labelled bool, next string) *metav1.PartialObjectMetadataList {
	b.Helper()
	list := &metav1.PartialObjectMetadataList{}
	opts := []client.ListOption{client.InNamespace(syncNamespace), client.Limit(listPage), client.Continue(next)}
	switch kind {
	case "SecretList":
		list.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: kind})
		if labelled {
			opts = append(opts, client.HasLabels{ss1.LabelSecretSync})
		}
	case "SecretSyncList":
		list.SetGroupVersionKind(ss1.GroupVersion.WithKind(kind))
	default:
		b.Fatalf("list: unknown kind %s", kind)
	}
	if err := r.cl.List(b.Context(), list, opts...); err != nil {
		b.Fatalf("list %s: %v", kind, err)
	}
	return list
}

// startAWS starts moto_server with one Secrets Manager secret per class
// (bench/obj-NN), the counting proxy in front of it, and
// keymount-provider-aws with every AWS endpoint at the proxy.
func (r *ctrlRun) startAWS(b *testing.B, bin string) {
	b.Helper()
	endpoint := motoserver.StartLogging(b, filepath.Join(r.dir, "moto.log"))
	sm := secretsmanager.New(secretsmanager.Options{Region: motoRegion, BaseEndpoint: aws.String(endpoint),
		Credentials: motoserver.Credentials()})
	for i := range r.sc.classes {
		_, err := sm.CreateSecret(b.Context(), &secretsmanager.CreateSecretInput{
			Name: aws.String("bench/" + objectName(i)), SecretString: aws.String(string(randomHexBytes(ctrlObjectSize))),
		})
		if err != nil {
			b.Fatalf("moto: CreateSecret: %v", err)
		}
	}
	r.counter = startStoreCounter(b, endpoint)
	startProvider(b, "keymount-provider-aws", filepath.Join(r.dir, "provider-aws.log"), bin,
		filepath.Join(r.sockets, "aws.sock"), awsEnv(),
		"--provider-dir="+r.sockets, "--name=aws", "--kubeconfig="+r.kubeconfig, "--region="+motoRegion,
		"--aws-endpoint="+r.counter.url, "--sts-endpoint="+r.counter.url)
}

// String names the round's figures, for logs.
func (rr roundResult) String() string {
	return fmt.Sprintf("Secrets written %d, SecretSyncs written %d, refreshes %d", rr.secretWrites, rr.syncWrites, rr.refreshes)
}
