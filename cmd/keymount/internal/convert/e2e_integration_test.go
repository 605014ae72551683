//go:build integration

package convert_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keymount/keymount/cmd/keymount/internal/convert"
	"github.com/keymount/keymount/tests/motoserver"
	"github.com/keymount/keymount/tests/poll"
)

const (
	region = "eu-west-1"
	ns     = "team"
	// eventually is how long the test waits for the controller.
	eventually = 60 * time.Second
)

// input is what a team runs with External Secrets: two ESO stores (Secrets
// Manager and Parameter Store, IRSA through the ServiceAccount "app"), an
// ExternalSecret of plain values and JSON properties, one of parameters
// read once, one with templates (mergePolicy Replace), one with a template
// merged into its data (Merge), and a KES ExternalSecret.
const input = `apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: sm, namespace: team}
spec:
  provider:
    aws:
      service: SecretsManager
      region: eu-west-1
      auth: {jwt: {serviceAccountRef: {name: app}}}
---
apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: params, namespace: team}
spec:
  provider:
    aws:
      service: ParameterStore
      region: eu-west-1
      prefix: /prod/
      auth: {jwt: {serviceAccountRef: {name: app}}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: app-db, namespace: team}
spec:
  refreshInterval: 1h
  secretStoreRef: {name: sm, kind: SecretStore}
  target:
    name: app-db-credentials
    template:
      type: Opaque
      metadata:
        labels: {app: web}
        annotations: {team.example/owner: payments}
  data:
  - {secretKey: api-token, remoteRef: {key: team/api-token}}
  - {secretKey: previous-token, remoteRef: {key: team/api-token, version: AWSPREVIOUS}}
  - {secretKey: username, remoteRef: {key: team/db, property: username}}
  - {secretKey: password, remoteRef: {key: team/db, property: password}}
  - {secretKey: port, remoteRef: {key: team/db, property: port}}
  - {secretKey: db-host, remoteRef: {key: team/db, property: database.host}}
  - {secretKey: cloud-region, remoteRef: {key: team/db, property: cloud-region}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: settings, namespace: team}
spec:
  refreshInterval: "0"
  secretStoreRef: {name: params}
  data:
  - {secretKey: currency, remoteRef: {key: team/currency}}
  - {secretKey: first-currency, remoteRef: {key: team/currency, version: "1"}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: dsn, namespace: team}
spec:
  secretStoreRef: {name: sm}
  target:
    template:
      engineVersion: v2
      data:
        dsn: 'postgres://{{ .username }}:{{ .password }}@{{ .host }}:{{ .port }}/app?sslmode=require'
        auth: '{{ printf "%s:%s" .username .password | b64enc }}'
        user: '{{ .username | upper }}'
        static: admin
  data:
  - {secretKey: username, remoteRef: {key: team/db, property: username}}
  - {secretKey: password, remoteRef: {key: team/db, property: password}}
  - {secretKey: host, remoteRef: {key: team/db, property: database.host}}
  - {secretKey: port, remoteRef: {key: team/db, property: port}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: bearer, namespace: team}
spec:
  secretStoreRef: {name: sm}
  target:
    template:
      mergePolicy: Merge
      data:
        header: 'Bearer {{ .token | trim }}'
  data:
  - {secretKey: token, remoteRef: {key: team/api-token}}
---
apiVersion: kubernetes-client.io/v1
kind: ExternalSecret
metadata: {name: legacy, namespace: team}
spec:
  backendType: secretsManager
  region: eu-west-1
  data:
  - {key: team/db, name: password, property: password}
  - {key: team/api-token, name: token}
`

// esoValue is what ESO's AWS provider writes for a store value and a
// remoteRef.property, as documented: the value as it is without a
// property; with one, the field of the JSON value at that gjson path (a
// top-level key of that exact name first, then the dotted path), a string
// without its quotes, anything else as its JSON text.
func esoValue(t *testing.T, value, property string) []byte {
	t.Helper()
	if property == "" {
		return []byte(value)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(value), &top); err != nil {
		t.Fatalf("the test's value is not a JSON object: %v", err)
	}
	raw, ok := top[property]
	if !ok {
		raw = json.RawMessage(value)
		for _, f := range strings.Split(property, ".") {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("property %q: %v", property, err)
			}
			if raw, ok = m[f]; !ok {
				t.Fatalf("property %q: no field %q", property, f)
			}
		}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []byte(s)
	}
	return raw
}

// TestConvertedSecretsMatchExternalSecrets is point 6's end-to-end proof:
// the objects keymount convert writes for ESO's and KES's ExternalSecrets,
// applied to a real API server, make keymount-controller with the AWS
// provider (against moto_server) write Secrets whose data is byte for byte
// what External Secrets would have written from the same store values
// (plain values, JSON properties, templates), with the same name, type,
// labels and annotations.
func TestConvertedSecretsMatchExternalSecrets(t *testing.T) {
	endpoint := motoserver.Start(t)
	values := seedStore(t, endpoint)
	cl := startCluster(t, endpoint, region)
	cl.namespace(t, ns)
	cl.irsaServiceAccount(t, ns, "app")

	applyAll(t, cl, convertInput(t, input, convert.Options{ServiceAccount: "app"}))

	db := values["team/db"]
	want := map[string]wantSecret{
		"app-db-credentials": {typ: corev1.SecretTypeOpaque, labels: map[string]string{"app": "web"},
			annotations: map[string]string{"team.example/owner": "payments"},
			data: map[string][]byte{
				"api-token":      esoValue(t, values["team/api-token"], ""),
				"previous-token": []byte(values["team/api-token@AWSPREVIOUS"]),
				"username":       esoValue(t, db, "username"),
				"password":       esoValue(t, db, "password"),
				"port":           esoValue(t, db, "port"),
				"db-host":        esoValue(t, db, "database.host"),
				"cloud-region":   esoValue(t, db, "cloud-region"),
			}},
		"settings": {typ: corev1.SecretTypeOpaque, data: map[string][]byte{
			"currency": []byte(values["/prod/team/currency"]), "first-currency": []byte(values["/prod/team/currency:1"]),
		}},
		// ESO's templates (engine v2: Go text/template with sprig's
		// functions over the data keys' values): mergePolicy Replace keeps
		// only the templated keys, Merge the data keys too.
		"dsn": {typ: corev1.SecretTypeOpaque, data: esoTemplate(t, map[string]string{
			"username": string(esoValue(t, db, "username")), "password": string(esoValue(t, db, "password")),
			"host": string(esoValue(t, db, "database.host")), "port": string(esoValue(t, db, "port")),
		}, map[string]string{
			"dsn":    `postgres://{{ .username }}:{{ .password }}@{{ .host }}:{{ .port }}/app?sslmode=require`,
			"auth":   `{{ printf "%s:%s" .username .password | b64enc }}`,
			"user":   `{{ .username | upper }}`,
			"static": `admin`,
		})},
		"bearer": {typ: corev1.SecretTypeOpaque, data: merge(
			map[string][]byte{"token": []byte(values["team/api-token"])},
			esoTemplate(t, map[string]string{"token": values["team/api-token"]}, map[string]string{"header": `Bearer {{ .token | trim }}`}),
		)},
		// KES: JSON.parse(value)[property], and the value as it is.
		"legacy": {typ: corev1.SecretTypeOpaque, data: map[string][]byte{
			"password": esoValue(t, db, "password"), "token": []byte(values["team/api-token"]),
		}},
	}
	for name, w := range want {
		got := waitSecret(t, cl, name)
		w.check(t, got)
	}
}

// esoTemplate renders templates as ESO's engine v2 does: text/template
// with sprig's functions, dot the data keys' values.
func esoTemplate(t *testing.T, data, templates map[string]string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for key, text := range templates {
		tmpl, err := template.New(key).Option("missingkey=error").Funcs(sprig.TxtFuncMap()).Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := tmpl.Execute(&b, data); err != nil {
			t.Fatal(err)
		}
		out[key] = b.Bytes()
	}
	return out
}

func merge(ms ...map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// seedStore puts the store values into moto and returns them by name.
func seedStore(t *testing.T, endpoint string) map[string]string {
	t.Helper()
	ctx := t.Context()
	sm := secretsmanager.New(secretsmanager.Options{Region: region, BaseEndpoint: awssdk.String(endpoint), Credentials: motoserver.Credentials()})
	ps := ssm.New(ssm.Options{Region: region, BaseEndpoint: awssdk.String(endpoint), Credentials: motoserver.Credentials()})
	db, err := json.Marshal(map[string]any{
		"username": "admin", "password": "pw-" + randomHex(t), "port": 5432,
		"database": map[string]any{"host": "db-" + randomHex(t) + ".internal"}, "cloud-region": "eu-west-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{
		"team/db":                    string(db),
		"team/api-token@AWSPREVIOUS": "tok-" + randomHex(t),
		"team/api-token":             "tok-" + randomHex(t) + "\n", // a trailing newline is kept
		"/prod/team/currency:1":      "USD-" + randomHex(t),
		"/prod/team/currency":        "EUR-" + randomHex(t),
	}
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: awssdk.String("team/db"), SecretString: awssdk.String(values["team/db"])}); err != nil {
		t.Fatalf("moto: CreateSecret team/db: %v", err)
	}
	// Two versions: the first becomes AWSPREVIOUS.
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: awssdk.String("team/api-token"), SecretString: awssdk.String(values["team/api-token@AWSPREVIOUS"])}); err != nil {
		t.Fatalf("moto: CreateSecret team/api-token: %v", err)
	}
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: awssdk.String("team/api-token"), SecretString: awssdk.String(values["team/api-token"])}); err != nil {
		t.Fatalf("moto: PutSecretValue team/api-token: %v", err)
	}
	// Two parameter versions: 1, then the current 2.
	for _, v := range []string{values["/prod/team/currency:1"], values["/prod/team/currency"]} {
		if _, err := ps.PutParameter(ctx, &ssm.PutParameterInput{Name: awssdk.String("/prod/team/currency"),
			Value: awssdk.String(v), Type: ssmtypes.ParameterTypeSecureString, Overwrite: awssdk.Bool(true)}); err != nil {
			t.Fatalf("moto: PutParameter: %v", err)
		}
	}
	return values
}

// applyAll creates every document of the conversion's output.
func applyAll(t *testing.T, cl *cluster, out []byte) {
	t.Helper()
	if n := len(createEach(t, cl, out)); n != 10 {
		t.Fatalf("applied %d objects, want 10 (a class and a SecretSync per ExternalSecret)", n)
	}
}

type wantSecret struct {
	typ                 corev1.SecretType
	labels, annotations map[string]string
	data                map[string][]byte
}

func (w wantSecret) check(t *testing.T, s *corev1.Secret) {
	t.Helper()
	if diff := cmp.Diff(w.data, s.Data); diff != "" {
		t.Errorf("Secret %s: data differs from External Secrets' (-want +got):\n%s", s.Name, diff)
	}
	if s.Type != w.typ {
		t.Errorf("Secret %s: type %q, want %q", s.Name, s.Type, w.typ)
	}
	for k, v := range w.labels {
		if s.Labels[k] != v {
			t.Errorf("Secret %s: label %s=%q, want %q", s.Name, k, s.Labels[k], v)
		}
	}
	for k, v := range w.annotations {
		if s.Annotations[k] != v {
			t.Errorf("Secret %s: annotation %s=%q, want %q", s.Name, k, s.Annotations[k], v)
		}
	}
}

// waitSecret waits for the controller to write the Secret.
func waitSecret(t *testing.T, cl *cluster, name string) *corev1.Secret {
	t.Helper()
	var s *corev1.Secret
	err := poll.Wait(t.Context(), eventually, func(ctx context.Context) (bool, error) {
		got, err := cl.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		s = got
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("waiting for Secret %s/%s: %v", ns, name, err)
	}
	return s
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// convertInput converts input, which must convert whole (notes aside), and
// returns the YAML written.
func convertInput(t *testing.T, input string, opts convert.Options) []byte {
	t.Helper()
	res, err := convert.Convert([]convert.Input{{Name: "input", R: strings.NewReader(input)}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, is := range res.Issues {
		if !is.Note {
			t.Errorf("issue: %s", is)
		}
	}
	var out bytes.Buffer
	if err := res.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
