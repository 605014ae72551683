package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/provider/aws/kubeclient"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/provider/vault"
	"github.com/keymount/keymount/provider/vault/spec"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/vaultenv"
)

// BenchmarkVaultHour is issue 22's target for leased secrets: an hour of a
// node's refreshes of three pods of one service account, each mounting a
// PKI certificate with a Vault lease (the role's generate_lease), against a
// real Vault whose Kubernetes auth reviews tokens with a real API server,
// through the Vault provider in process (as keymount-provider-vault runs
// it: Run maintaining logins and leases, tokens proven with the API
// server's issuer keys).
//
// The hour is compressed vaultHourCompress times, every duration alike:
// kubelet republishes each volume every 60 s, the rotation policy (the
// driver's, Periodic at 2 minutes) decides which republishes call the
// provider, each call carries a fresh pod-bound token (as kubelet's
// tokenRequests). Certificates are valid 50 minutes, logins 15 minutes
// (renewable to 5 hours), --reissue-margin is 10 minutes, the provider's
// maintenance runs every 15 s. Per pod per hour it reports:
//
//   - certs-issued/pod-hour: successful pki/issue requests in Vault's audit
//     log;
//   - revoked-while-mounted/pod-hour: certificates Vault's PKI reports
//     revoked (pki/cert/<serial>) while a pod had them mounted, checked
//     before every call that could replace one and at the end of the hour;
//   - logins/identity: successful Kubernetes auth logins in the audit log
//     (one identity, one node);
//   - k8s-api-requests/pod-hour: every request the provider's API server
//     client sent (a counting transport), all of them per node, not per call:
//     the issuer's discovery document and keys, read at start and again
//     after satoken's KeysMaxAge (1 hour, compressed too);
//   - k8s-api-requests/refresh: those sent by the refreshes after each
//     pod's first mount, per refresh.
func BenchmarkVaultHour(b *testing.B) {
	// Own control plane: a benchmark measures against a control plane loaded by nothing else.
	env := k8senv.Start(b, k8senv.Options{})
	v := vaultenv.Start(b, vaultenv.Options{Kube: env})
	v.Policy(b, "bench", `path "pki/issue/*" { capabilities = ["create", "update"] }`)
	v.PKIRole(b, "hour", vaultHourScaled(50*time.Minute), true)
	kube := kubernetes.NewForConfigOrDie(env.Config)

	var sum vaultHourCounts
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum.add(runVaultHour(b, env, v, kube, fmt.Sprintf("vault-hour-%d", i)))
	}
	b.StopTimer()
	pods := float64(b.N * vaultHourPods)
	b.ReportMetric(float64(sum.issued)/pods, "certs-issued/pod-hour")
	b.ReportMetric(float64(sum.revokedMounted)/pods, "revoked-while-mounted/pod-hour")
	b.ReportMetric(float64(sum.logins)/float64(b.N), "logins/identity")
	b.ReportMetric(float64(sum.apiRequests)/pods, "k8s-api-requests/pod-hour")
	b.ReportMetric(float64(sum.refreshAPIRequests)/float64(max(sum.refreshes, 1)), "k8s-api-requests/refresh")
}

const (
	// vaultHourCompress: the simulated hour takes an hour / 30 = 2 minutes.
	vaultHourCompress = 30
	vaultHourPods     = 3
	// vaultHourRepublish is kubelet's republish period, simulated.
	vaultHourRepublish = time.Minute
	// vaultHourInterval is the rotation interval, simulated.
	vaultHourInterval = 2 * time.Minute
)

// vaultHourObjects: a PKI certificate, issued as vault-csi-provider's
// classes ask for one.
const vaultHourObjects = `
- objectName: cert
  secretPath: pki/issue/hour
  method: PUT
  secretArgs: {common_name: a.example.com}
`

func vaultHourScaled(d time.Duration) time.Duration { return d / vaultHourCompress }

// vaultHourCounts are what one simulated hour counted.
type vaultHourCounts struct {
	issued, revokedMounted, logins  int
	apiRequests, refreshAPIRequests int64
	refreshes                       int
}

func (c *vaultHourCounts) add(o vaultHourCounts) {
	c.issued += o.issued
	c.revokedMounted += o.revokedMounted
	c.logins += o.logins
	c.apiRequests += o.apiRequests
	c.refreshAPIRequests += o.refreshAPIRequests
	c.refreshes += o.refreshes
}

// vaultHourPod is one pod's volume as the driver records it.
type vaultHourPod struct {
	pod         *corev1.Pod
	versions    map[string]string
	serial      string // of the mounted certificate
	lastRefresh time.Time
}

// runVaultHour runs one simulated hour with a new provider (a node that
// just started) for three new pods of a new identity in namespace ns.
func runVaultHour(b *testing.B, env *k8senv.Env, v *vaultenv.Vault, kube kubernetes.Interface, ns string) vaultHourCounts {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	pods := vaultHourIdentity(b, v, kube, ns)
	var api atomic.Int64
	p := vaultHourProvider(b, env, v, &api)
	go p.Run(ctx)

	audit := v.Audit(b)
	issued0, logins0 := audit.Count("update", "pki/issue/hour"), audit.Count("update", "auth/kubernetes/login")
	policy := rotation.Policy{Kind: rotation.Periodic, Interval: vaultHourInterval}
	var c vaultHourCounts
	revoked := map[string]bool{}
	start := time.Now() // simulated time: start + tick × republish
	republish := time.NewTicker(vaultHourScaled(vaultHourRepublish))
	defer republish.Stop()
	for tick := 0; tick < int(time.Hour/vaultHourRepublish); tick++ {
		now := start.Add(time.Duration(tick) * vaultHourRepublish)
		for _, vp := range pods {
			first := vp.versions == nil
			if !first && policy.Decide(rotation.State{VolumeID: vp.pod.Name, LastRefresh: vp.lastRefresh},
				rotation.Triggers{}, now, rotation.Backoff{}) != rotation.DecisionDue {
				continue // the driver answers from its record: no provider call
			}
			if !first && vaultCertRevoked(b, v, vp.serial) {
				revoked[vp.serial] = true
			}
			before := api.Load()
			vaultHourMount(b, p, kube, vp)
			vp.lastRefresh = now
			if !first {
				c.refreshes++
				c.refreshAPIRequests += api.Load() - before
			}
		}
		<-republish.C // the next republish, in compressed time
	}
	for _, vp := range pods {
		if vaultCertRevoked(b, v, vp.serial) {
			revoked[vp.serial] = true
		}
	}
	audit = v.Audit(b)
	c.issued = audit.Count("update", "pki/issue/hour") - issued0
	c.logins = audit.Count("update", "auth/kubernetes/login") - logins0
	c.revokedMounted = len(revoked)
	c.apiRequests = api.Load()
	if c.issued < vaultHourPods || c.logins < 1 {
		b.Fatalf("the audit log counted %d certificates and %d logins for %d pods: the benchmark measured nothing",
			c.issued, c.logins, vaultHourPods)
	}
	return c
}

// vaultHourIdentity creates namespace ns, its service account app, a Vault
// role of both bound to it (logins valid 15 minutes, renewable to 5 hours)
// and three pods of app.
func vaultHourIdentity(b *testing.B, v *vaultenv.Vault, kube kubernetes.Interface, ns string) []*vaultHourPod {
	b.Helper()
	ctx := b.Context()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	v.KubernetesRole(b, vaultenv.Role{Name: ns, Namespace: ns, ServiceAccount: "app", Policies: []string{"bench"},
		TTL: vaultHourScaled(15 * time.Minute), MaxTTL: vaultHourScaled(5 * time.Hour)})
	pods := make([]*vaultHourPod, 0, vaultHourPods)
	for i := range vaultHourPods {
		pod, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)},
			Spec: corev1.PodSpec{ServiceAccountName: "app", AutomountServiceAccountToken: new(bool),
				Containers: []corev1.Container{{Name: "app", Image: "app"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		pods = append(pods, &vaultHourPod{pod: pod})
	}
	return pods
}

// vaultHourProvider is the provider as keymount-provider-vault builds it,
// with the hour's compressed durations and an API server client counting
// its requests in api.
func vaultHourProvider(b *testing.B, env *k8senv.Env, v *vaultenv.Vault, api *atomic.Int64) *vault.Provider {
	b.Helper()
	rc := rest.CopyConfig(env.Config)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt: rt, n: api} })
	cs, err := kubeclient.ForConfig(rc, kubeclient.DefaultQPS, kubeclient.DefaultBurst)
	if err != nil {
		b.Fatal(err)
	}
	tokens, err := satoken.New(satoken.Config{KeysMaxAge: vaultHourScaled(satoken.DefaultKeysMaxAge)}, cs)
	if err != nil {
		b.Fatal(err)
	}
	p, err := vault.New(vault.Config{Address: v.Addr,
		ReissueMargin: vaultHourScaled(vault.DefaultReissueMargin),
		VolumeIdle:    vaultHourScaled(vault.DefaultVolumeIdle),
		MaintainEvery: vaultHourScaled(vault.DefaultMaintainEvery)}, tokens)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// countingTransport counts the requests sent through it.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.rt.RoundTrip(r)
}

// vaultHourMount calls the provider for vp's volume as the driver does, with
// a fresh pod-bound token as kubelet sends, and records what it mounted.
func vaultHourMount(b *testing.B, p *vault.Provider, kube kubernetes.Interface, vp *vaultHourPod) {
	b.Helper()
	tr, err := kube.CoreV1().ServiceAccounts(vp.pod.Namespace).CreateToken(b.Context(), "app", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"vault"},
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: vp.pod.Name, UID: vp.pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("TokenRequest: %v", err)
	}
	tokens, _ := json.Marshal(map[string]any{"vault": map[string]string{"token": tr.Status.Token,
		"expirationTimestamp": tr.Status.ExpirationTimestamp.Format(time.RFC3339)}})
	attrs := map[string]string{
		spec.KeyRole: vp.pod.Namespace, spec.KeyObjects: strings.TrimSpace(vaultHourObjects),
		spec.KeyPodName: vp.pod.Name, spec.KeyPodNamespace: vp.pod.Namespace, spec.KeyPodUID: string(vp.pod.UID),
		spec.KeyServiceAccount: "app", spec.KeyTokens: string(tokens), spec.KeyClass: "vault-hour",
		"csi.storage.k8s.io/ephemeral": "true",
	}
	// keymount's driver names a staging directory beside the mount
	// directory on a first publish, the mount directory on refreshes.
	target := "/var/lib/kubelet/pods/" + string(vp.pod.UID) + "/volumes/kubernetes.io~csi/vault/mount"
	if vp.versions == nil {
		target = "/var/lib/kubelet/pods/" + string(vp.pod.UID) + "/volumes/kubernetes.io~csi/vault/keymount-stage-0123456789abcdef"
	}
	ctx, cancel := context.WithTimeout(b.Context(), 2*time.Minute) // kubelet's deadline
	defer cancel()
	res, err := p.Mount(ctx, &server.MountRequest{Attributes: attrs, Secrets: map[string]string{}, Permission: 0o644,
		CurrentVersions: vp.versions, TargetPath: target})
	if err != nil {
		b.Fatalf("mount of %s/%s: %v", vp.pod.Namespace, vp.pod.Name, err)
	}
	vp.versions = map[string]string{}
	for _, o := range res.Versions {
		vp.versions[o.ID] = o.Version
	}
	if len(res.Files) != 1 {
		b.Fatalf("mount of %s/%s returned %d files, want the certificate", vp.pod.Namespace, vp.pod.Name, len(res.Files))
	}
	var ans struct {
		Data struct {
			Serial string `json:"serial_number"`
		} `json:"data"`
	}
	if err := json.Unmarshal(res.Files[0].Contents, &ans); err != nil || ans.Data.Serial == "" {
		b.Fatalf("the certificate file is not Vault's issue answer with a serial number (%v)", err)
	}
	vp.serial = ans.Data.Serial
}

// vaultCertRevoked asks Vault's PKI (as root) whether the certificate of
// serial is revoked.
func vaultCertRevoked(b *testing.B, v *vaultenv.Vault, serial string) bool {
	b.Helper()
	s, err := v.Client.Logical().ReadWithContext(b.Context(), vaultenv.PKIMount+"/cert/"+serial)
	if err != nil || s == nil {
		b.Fatalf("reading certificate %s from Vault's PKI: %v", serial, err)
	}
	n, ok := s.Data["revocation_time"].(json.Number)
	if !ok {
		b.Fatalf("certificate %s: revocation_time is %T, want a number", serial, s.Data["revocation_time"])
	}
	t, err := n.Int64()
	if err != nil {
		b.Fatal(err)
	}
	return t != 0
}
