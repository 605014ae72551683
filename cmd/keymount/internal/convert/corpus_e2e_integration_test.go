//go:build integration

package convert_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cmd/keymount/internal/convert"
	"github.com/keymount/keymount/tests/motoserver"
	"github.com/keymount/keymount/tests/poll"
)

// corpusDir holds the converter's corpus: <case>.yaml, and beside every
// case with an AWS store <case>.e2e.yaml (e2eCase).
var corpusDir = filepath.Join("testdata", "corpus")

// e2eCase is a corpus case's <case>.e2e.yaml: what its AWS store holds, and
// the Secrets External Secrets (or KES) writes from it, stated from their
// documented semantics.
type e2eCase struct {
	// Namespaces are labels of namespaces (ClusterExternalSecret
	// selectors).
	Namespaces     map[string]map[string]string `json:"namespaces"`
	SecretsManager []e2eSMSecret                `json:"secretsManager"`
	SSM            []e2eParameter               `json:"ssm"`
	// Existing are Secrets another tool wrote before the conversion.
	Existing []e2eSecret `json:"existing"`
	Secrets  []e2eSecret `json:"secrets"`
	Absent   []e2eName   `json:"absent"`
}

type e2eSMSecret struct {
	Name string `json:"name"`
	// Value is the current SecretString; Binary (base64) the current
	// SecretBinary instead.
	Value       *string           `json:"value"`
	Binary      string            `json:"binary"`
	Previous    *string           `json:"previous"`
	Versions    []e2eSMVersion    `json:"versions"`
	Tags        map[string]string `json:"tags"`
	Description string            `json:"description"`
}

type e2eSMVersion struct {
	ID     string   `json:"id"`
	Value  string   `json:"value"`
	Stages []string `json:"stages"`
}

type e2eParameter struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Value   string   `json:"value"`
	History []string `json:"history"`
}

type e2eName struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

type e2eSecret struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Type        corev1.SecretType `json:"type"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Data        map[string]string `json:"data"`
	BinaryData  map[string]string `json:"binaryData"`
}

// bytes is the Secret's data as bytes.
func (s e2eSecret) bytes(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for k, v := range s.Data {
		out[k] = []byte(v)
	}
	for k, v := range s.BinaryData {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			t.Fatalf("binaryData %s of Secret %s/%s: %v", k, s.Namespace, s.Name, err)
		}
		out[k] = b
	}
	return out
}

// TestCorpusSecretsMatchExternalSecrets: for every corpus case that has an
// AWS store (each has its <case>.e2e.yaml; the refused- cases convert only
// in part and have none), the converted objects applied to a real API
// server with keymount-controller (SecretSync and fan-out) and keymount's
// AWS provider against moto_server, seeded with the case's store, make
// exactly the Secrets the case says External Secrets makes: name, type,
// every key's bytes, labels and annotations (and none where it makes
// none). Cases run one after another on one cluster; each gets its own
// IRSA role (so the provider's cache, per identity, never serves one case
// another's values) and a reset moto.
func TestCorpusSecretsMatchExternalSecrets(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(corpusDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	endpoint := motoserver.Start(t)
	// A ServiceAccount's role is read afresh at every call: each case
	// re-creates its ServiceAccounts with a role of its own.
	cl := startClusterWith(t, endpoint, region, time.Nanosecond)
	startFanout(t, cl)
	ran := 0
	for _, path := range cases {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		if strings.HasSuffix(name, ".e2e") || strings.HasPrefix(name, "refused-") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(corpusDir, name+".e2e.yaml"))
		if !hasAWSStore(src) {
			if err == nil {
				t.Errorf("%s.e2e.yaml: the case has no AWS store", name)
			}
			continue
		}
		if err != nil {
			t.Errorf("case %s has an AWS store but no %s.e2e.yaml: state what External Secrets writes from what store", name, name)
			continue
		}
		var c e2eCase
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			t.Errorf("%s.e2e.yaml: %v", name, err)
			continue
		}
		ran++
		t.Run(name, func(t *testing.T) { runE2ECase(t, cl, endpoint, name, src, &c) })
	}
	if ran == 0 {
		t.Fatal("no corpus case ran")
	}
}

// hasAWSStore reports whether a case's input reads from AWS: an ESO store
// with provider aws, or a KES ExternalSecret.
func hasAWSStore(src []byte) bool {
	s := string(src)
	return strings.Contains(s, "\n    aws:") || strings.Contains(s, "backendType:")
}

// runE2ECase runs one case on the cluster and removes what it made.
func runE2ECase(t *testing.T, cl *cluster, endpoint, name string, src []byte, c *e2eCase) {
	role := "arn:aws:iam::123456789012:role/e2e-" + name
	resetMoto(t, endpoint)
	objs := caseObjects(t, name, src, role)
	touched := map[string]bool{}
	defer func() { cleanCase(t, cl, touched) }()
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			touched[ns] = true
		}
		if o.GetKind() == "Namespace" {
			touched[o.GetName()] = true
		}
	}
	for _, s := range c.Secrets {
		touched[s.Namespace] = true
	}
	for ns := range c.Namespaces {
		touched[ns] = true
	}
	for ns := range touched {
		ensureNamespace(t, cl, ns, c.Namespaces[ns])
	}
	regions := map[string]bool{region: true}
	for _, o := range objs {
		if o.GetKind() == "SecretProviderClass" {
			if r, _, _ := unstructured.NestedString(o.Object, "spec", "parameters", "region"); r != "" {
				regions[r] = true
			}
		}
	}
	for r := range regions {
		seedCase(t, endpoint, r, c)
	}
	for _, s := range c.Existing {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels, Annotations: s.Annotations},
			Type: s.Type, Data: s.bytes(t)}
		if err := cl.c.Create(t.Context(), sec, client.FieldOwner("other-writer")); err != nil {
			t.Fatal(err)
		}
	}
	irsaFor(t, cl, objs, role)
	for _, o := range objs {
		err := cl.c.Create(t.Context(), o)
		if o.GetKind() == "Namespace" && apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			t.Fatalf("create %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	checkCase(t, cl, c, objs)
}

// checkCase compares the Secrets the case's objects made with those
// External Secrets makes.
func checkCase(t *testing.T, cl *cluster, c *e2eCase, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, want := range c.Secrets {
		got := waitSecretIn(t, cl, want.Namespace, want.Name, want.bytes(t))
		typ := want.Type
		if typ == "" {
			typ = corev1.SecretTypeOpaque
		}
		if got.Type != typ {
			t.Errorf("Secret %s/%s: type %q, want External Secrets' %q", want.Namespace, want.Name, got.Type, typ)
		}
		for k, v := range want.Labels {
			if got.Labels[k] != v {
				t.Errorf("Secret %s/%s: label %s=%q, want %q", want.Namespace, want.Name, k, got.Labels[k], v)
			}
		}
		for k, v := range want.Annotations {
			if got.Annotations[k] != v {
				t.Errorf("Secret %s/%s: annotation %s=%q, want %q", want.Namespace, want.Name, k, got.Annotations[k], v)
			}
		}
	}
	for _, a := range c.Absent {
		waitSynced(t, cl, a, objs)
		if _, err := cl.cs.CoreV1().Secrets(a.Namespace).Get(t.Context(), a.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s/%s: %v, want none (External Secrets writes none)", a.Namespace, a.Name, err)
		}
	}
}

// caseObjects converts the case (its first line's options) and returns the
// output's objects, each IRSA ServiceAccount given role. A Pod Identity
// conversion is run with IRSA: moto has no EKS Pod Identity agent, and the
// identity changes nothing in the Secret.
func caseObjects(t *testing.T, name string, src []byte, role string) []*unstructured.Unstructured {
	t.Helper()
	out := convertInput(t, string(src), convert.CorpusOptions(t, src))
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(strings.TrimPrefix(doc, "---\n")), &obj); err != nil {
			t.Fatalf("case %s: output document: %v", name, err)
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		switch u.GetKind() {
		case "ServiceAccount":
			ann := u.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann["eks.amazonaws.com/role-arn"] = role
			u.SetAnnotations(ann)
		case "SecretProviderClass":
			unstructured.RemoveNestedField(u.Object, "spec", "parameters", "usePodIdentity")
		}
		objs = append(objs, u)
	}
	return objs
}

// irsaFor creates (or re-roles) with role every ServiceAccount a SecretSync
// of objs reads as that objs do not create: the ServiceAccount a store's
// jwt auth or --service-account names.
func irsaFor(t *testing.T, cl *cluster, objs []*unstructured.Unstructured, role string) {
	t.Helper()
	made := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() == "ServiceAccount" {
			made[o.GetNamespace()+"/"+o.GetName()] = true
		}
	}
	for _, o := range objs {
		if o.GetKind() != "SecretSync" {
			continue
		}
		sa, _, _ := unstructured.NestedString(o.Object, "spec", "serviceAccountName")
		key := o.GetNamespace() + "/" + sa
		if sa == "" || made[key] {
			continue
		}
		made[key] = true
		acc := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: sa,
			Annotations: map[string]string{"eks.amazonaws.com/role-arn": role}}}
		if err := cl.c.Create(t.Context(), acc); err != nil {
			t.Fatal(err)
		}
	}
}

// ensureNamespace creates the namespace, or sets its labels when it exists
// from an earlier case.
func ensureNamespace(t *testing.T, cl *cluster, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{}
	err := cl.c.Get(t.Context(), client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		err = cl.c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	} else if err == nil {
		ns.Labels = labels
		err = cl.c.Update(t.Context(), ns)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// resetMoto empties moto_server (its /moto-api/reset).
func resetMoto(t *testing.T, endpoint string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint+"/moto-api/reset", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("moto reset: %s", resp.Status)
	}
}

// seedCase puts the case's store into moto in region.
func seedCase(t *testing.T, endpoint, region string, c *e2eCase) {
	t.Helper()
	ctx := t.Context()
	sm := secretsmanager.New(secretsmanager.Options{Region: region, BaseEndpoint: awssdk.String(endpoint), Credentials: motoserver.Credentials()})
	ps := ssm.New(ssm.Options{Region: region, BaseEndpoint: awssdk.String(endpoint), Credentials: motoserver.Credentials()})
	for _, s := range c.SecretsManager {
		current := func(in *secretsmanager.CreateSecretInput) {
			switch {
			case s.Value != nil:
				in.SecretString = s.Value
			case s.Binary != "":
				b, err := base64.StdEncoding.DecodeString(s.Binary)
				if err != nil {
					t.Fatalf("secret %s: binary: %v", s.Name, err)
				}
				in.SecretBinary = b
			default:
				t.Fatalf("secret %s: neither value nor binary", s.Name)
			}
		}
		in := &secretsmanager.CreateSecretInput{Name: awssdk.String(s.Name)}
		if s.Description != "" {
			in.Description = awssdk.String(s.Description)
		}
		for _, k := range sortedKeys(s.Tags) {
			in.Tags = append(in.Tags, smtypes.Tag{Key: awssdk.String(k), Value: awssdk.String(s.Tags[k])})
		}
		if s.Previous != nil {
			in.SecretString = s.Previous
		} else {
			current(in)
		}
		if _, err := sm.CreateSecret(ctx, in); err != nil {
			t.Fatalf("moto: CreateSecret %s: %v", s.Name, err)
		}
		if s.Previous != nil {
			next := &secretsmanager.CreateSecretInput{}
			current(next)
			if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: awssdk.String(s.Name),
				SecretString: next.SecretString, SecretBinary: next.SecretBinary}); err != nil {
				t.Fatalf("moto: PutSecretValue %s: %v", s.Name, err)
			}
		}
		for _, v := range s.Versions {
			if len(v.Stages) == 0 {
				t.Fatalf("secret %s: version %s without stages would become current; give it a stage", s.Name, v.ID)
			}
			put := &secretsmanager.PutSecretValueInput{SecretId: awssdk.String(s.Name), SecretString: awssdk.String(v.Value), VersionStages: v.Stages}
			if v.ID != "" {
				put.ClientRequestToken = awssdk.String(v.ID)
			}
			if _, err := sm.PutSecretValue(ctx, put); err != nil {
				t.Fatalf("moto: PutSecretValue %s (%v): %v", s.Name, v.Stages, err)
			}
		}
	}
	for _, p := range c.SSM {
		typ := ssmtypes.ParameterType(p.Type)
		if typ == "" {
			typ = ssmtypes.ParameterTypeString
		}
		for _, v := range append(slices.Clone(p.History), p.Value) {
			if _, err := ps.PutParameter(ctx, &ssm.PutParameterInput{Name: awssdk.String(p.Name), Value: awssdk.String(v), Type: typ,
				Overwrite: awssdk.Bool(true)}); err != nil {
				t.Fatalf("moto: PutParameter %s: %v", p.Name, err)
			}
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// waitSecretIn waits until the Secret ns/name holds exactly data and
// returns it; on the deadline it fails with the difference.
func waitSecretIn(t *testing.T, cl *cluster, ns, name string, data map[string][]byte) *corev1.Secret {
	t.Helper()
	var got *corev1.Secret
	err := poll.Wait(t.Context(), eventually, func(ctx context.Context) (bool, error) {
		s, err := cl.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		got = s
		return cmp.Equal(data, s.Data), nil
	})
	if err != nil {
		if got == nil {
			t.Fatalf("Secret %s/%s never written: %v%s", ns, name, err, syncStates(t, cl, ns))
		}
		t.Fatalf("Secret %s/%s differs from External Secrets' (-want +got):\n%s", ns, name, cmp.Diff(data, got.Data))
	}
	return got
}

// waitSynced waits until the SecretSync of the absent Secret (its
// ClusterExternalSecret's, for a namespace it leaves out) has reported
// Ready, so that a Secret it would write would be there.
func waitSynced(t *testing.T, cl *cluster, a e2eName, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "SecretSync" {
			continue
		}
		if o.GetNamespace() == a.Namespace && o.GetName() != a.Name {
			continue
		}
		key := client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}
		poll.Until(t, fmt.Sprintf("SecretSync %s Ready", key), func(ctx context.Context) (bool, error) {
			var ss ss1.SecretSync
			if err := cl.c.Get(ctx, key, &ss); err != nil {
				return false, err
			}
			return meta.IsStatusConditionTrue(ss.Status.Conditions, ss1.ConditionReady), nil
		})
	}
}

// syncStates describes every SecretSync's conditions, for a failure
// message (a copy's SecretSync is in another namespace than the Secret ns).
func syncStates(t *testing.T, cl *cluster, ns string) string {
	t.Helper()
	var l ss1.SecretSyncList
	if err := cl.c.List(context.Background(), &l); err != nil {
		return ""
	}
	b := strings.Builder{}
	fmt.Fprintf(&b, " (Secret's namespace %s)", ns)
	for _, ss := range l.Items {
		for _, c := range ss.Status.Conditions {
			fmt.Fprintf(&b, "\n  SecretSync %s/%s: %s=%s %s: %s", ss.Namespace, ss.Name, c.Type, c.Status, c.Reason, c.Message)
		}
	}
	return b.String()
}

// cleanCase deletes what a case made in the namespaces it touched — its
// SecretSyncs first (so no controller writes again), then every Secret,
// class and ServiceAccount — and waits until no Secret is left there.
func cleanCase(t *testing.T, cl *cluster, touched map[string]bool) {
	t.Helper()
	ctx := context.Background()
	for ns := range touched {
		if err := cl.c.DeleteAllOf(ctx, &ss1.SecretSync{}, client.InNamespace(ns)); err != nil {
			t.Errorf("delete the SecretSyncs of %s: %v", ns, err)
		}
	}
	for ns := range touched {
		for _, obj := range []client.Object{&secretsstorev1.SecretProviderClass{}, &corev1.ServiceAccount{}} {
			if err := cl.c.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
				t.Errorf("delete in %s: %v", ns, err)
			}
		}
		err := poll.Wait(ctx, eventually, func(ctx context.Context) (bool, error) {
			var l ss1.SecretSyncList
			if err := cl.c.List(ctx, &l, client.InNamespace(ns)); err != nil {
				return false, err
			}
			if len(l.Items) > 0 {
				return false, nil
			}
			if err := cl.c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(ns)); err != nil {
				return false, err
			}
			var secrets corev1.SecretList
			if err := cl.c.List(ctx, &secrets, client.InNamespace(ns)); err != nil {
				return false, err
			}
			return len(secrets.Items) == 0, nil
		})
		if err != nil {
			t.Errorf("namespace %s not emptied after the case: %v", ns, err)
		}
	}
}
