package aws_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/keymount/keymount/internal/satoken/satokentest"
	"github.com/keymount/keymount/provider/aws"
	"github.com/keymount/keymount/provider/aws/identity"
	"github.com/keymount/keymount/provider/aws/noderegion"
	"github.com/keymount/keymount/provider/aws/push"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/tests/motoserver"
)

// owner is the PushSecret of the pushes in these tests.
const owner = "shop/db-push"

// Outcomes, shorter.
const (
	unchanged = keymountv1.Outcome_OUTCOME_UNCHANGED
	created   = keymountv1.Outcome_OUTCOME_CREATED
	updated   = keymountv1.Outcome_OUTCOME_UPDATED
	adopted   = keymountv1.Outcome_OUTCOME_ADOPTED
	skipped   = keymountv1.Outcome_OUTCOME_SKIPPED
	conflicts = keymountv1.Outcome_OUTCOME_CONFLICT
	failedOut = keymountv1.Outcome_OUTCOME_FAILED
	removed   = keymountv1.Outcome_OUTCOME_REMOVED
)

// callCounter sends a pusher's requests to moto and counts them by
// operation (the X-Amz-Target's). before, when set, runs once before the
// first request of an operation is sent: a second writer's turn at a
// chosen point of the first one's push.
type callCounter struct {
	mu     sync.Mutex
	n      map[string]int
	before map[string]func()
}

func (c *callCounter) Do(req *http.Request) (*http.Response, error) {
	target := req.Header.Get("X-Amz-Target")
	op := target[strings.LastIndex(target, ".")+1:]
	c.mu.Lock()
	c.n[op]++
	hook := c.before[op]
	delete(c.before, op)
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	return http.DefaultClient.Do(req)
}

// counts returns the calls so far and starts counting afresh.
func (c *callCounter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// recordingIdentity stands in for IRSA (package identity has its own tests
// against moto's STS) and records whose credentials were asked for.
type recordingIdentity struct {
	mu     sync.Mutex
	asked  []string
	forgot []string
}

func (r *recordingIdentity) For(_ context.Context, s *spec.Spec) (*identity.Identity, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, s.Namespace+"/"+s.ServiceAccount+"@"+s.Region)
	return &identity.Identity{Key: s.Namespace + "/" + s.ServiceAccount, Credentials: motoserver.Credentials()}, nil
}

func (r *recordingIdentity) Forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgot = append(r.forgot, key)
}

// pushEnv is a pusher against one moto_server, with the attributes of the
// PushSecret's ServiceAccount (shop/pusher, token proven) and clients of
// its own to set up and read back.
type pushEnv struct {
	endpoint string
	iss      *satokentest.Issuer
	ids      *recordingIdentity
	calls    *callCounter
	provider *aws.Provider
	pusher   *aws.Pusher
	attrs    map[string]string
	sm       *secretsmanager.Client
	ssm      *ssm.Client
}

func newPushEnv(t *testing.T) *pushEnv {
	t.Helper()
	return newPushEnvAt(t, motoserver.Start(t))
}

// newPushEnvAt is a second pusher (another provider process) writing to
// the same endpoint.
func newPushEnvAt(t *testing.T, endpoint string) *pushEnv {
	t.Helper()
	tokens, iss := newVerifier(t)
	e := &pushEnv{endpoint: endpoint, iss: iss, ids: &recordingIdentity{}, calls: &callCounter{n: map[string]int{}, before: map[string]func(){}}}
	p, err := aws.New(noderegion.New(noderegion.Config{}, nil), tokens, e.ids, store.New(store.Config{Endpoint: endpoint}))
	if err != nil {
		t.Fatal(err)
	}
	e.provider = p
	if e.pusher, err = aws.NewPusher(p, push.New(push.Config{Endpoint: endpoint, HTTPClient: e.calls})); err != nil {
		t.Fatal(err)
	}
	// A PushSecret's attributes: the class's parameters and its
	// ServiceAccount's identity, no pod.
	tok := iss.Sign(t, satokentest.Token{Audiences: []string{identity.AudienceSTS}, Namespace: "shop", ServiceAccount: "pusher"})
	e.attrs = withToken(t, map[string]string{
		spec.KeyRegion: region, spec.KeyPodNamespace: "shop", spec.KeyServiceAccount: "pusher",
	}, identity.AudienceSTS, tok)
	cfg := awssdk.Config{Region: region, Credentials: motoserver.Credentials(), BaseEndpoint: awssdk.String(endpoint)}
	e.sm, e.ssm = secretsmanager.NewFromConfig(cfg), ssm.NewFromConfig(cfg)
	return e
}

// push pushes items and fails the test on a request-wide error.
func (e *pushEnv) push(t *testing.T, items ...server.PushItem) []server.PushResult {
	t.Helper()
	res, err := e.pusher.Push(t.Context(), &server.PushRequest{Attributes: e.attrs, Secrets: map[string]string{}, Items: items})
	if err != nil {
		t.Fatalf("Push: %v", err)
	}
	if len(res) != len(items) {
		t.Fatalf("Push answered %d results for %d items", len(res), len(items))
	}
	return res
}

func (e *pushEnv) remove(t *testing.T, items ...server.PushItem) []server.PushResult {
	t.Helper()
	res, err := e.pusher.Remove(t.Context(), &server.PushRequest{Attributes: e.attrs, Secrets: map[string]string{}, Items: items})
	if err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if len(res) != len(items) {
		t.Fatalf("Remove answered %d results for %d items", len(res), len(items))
	}
	return res
}

// current is the secret's AWSCURRENT value and version.
func (e *pushEnv) current(t *testing.T, name string) (value, version string) {
	t.Helper()
	out, err := e.sm.GetSecretValue(t.Context(), &secretsmanager.GetSecretValueInput{SecretId: &name, VersionStage: awssdk.String("AWSCURRENT")})
	if err != nil {
		t.Fatalf("GetSecretValue %s: %v", name, err)
	}
	if out.SecretString == nil {
		return string(out.SecretBinary), awssdk.ToString(out.VersionId)
	}
	return *out.SecretString, awssdk.ToString(out.VersionId)
}

// theirs creates a secret as someone else would, with tags k=v pairs.
func (e *pushEnv) theirs(t *testing.T, name, value string, tags ...string) string {
	t.Helper()
	in := &secretsmanager.CreateSecretInput{Name: &name, SecretString: &value}
	for i := 0; i+1 < len(tags); i += 2 {
		in.Tags = append(in.Tags, smTag(tags[i], tags[i+1]))
	}
	out, err := e.sm.CreateSecret(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	return awssdk.ToString(out.VersionId)
}

// putTheirs writes a new current value as someone else would.
func (e *pushEnv) putTheirs(t *testing.T, name, value string) string {
	t.Helper()
	out, err := e.sm.PutSecretValue(t.Context(), &secretsmanager.PutSecretValueInput{SecretId: &name, SecretString: &value})
	if err != nil {
		t.Fatal(err)
	}
	return awssdk.ToString(out.VersionId)
}

// item is a Secrets Manager item of owner, policy REPLACE, changed by opts.
func item(key, value string, opts ...func(*server.PushItem)) server.PushItem {
	it := server.PushItem{RemoteKey: key, Value: []byte(value), Owner: owner}
	for _, o := range opts {
		o(&it)
	}
	return it
}

func last(v string) func(*server.PushItem)     { return func(it *server.PushItem) { it.LastVersion = v } }
func property(p string) func(*server.PushItem) { return func(it *server.PushItem) { it.Property = p } }
func objectType(t string) func(*server.PushItem) {
	return func(it *server.PushItem) { it.ObjectType = t }
}
func policy(p keymountv1.UpdatePolicy) func(*server.PushItem) {
	return func(it *server.PushItem) { it.Policy = p }
}
func same(it *server.PushItem) { it.Unchanged = true }

// want checks one result's outcome, and that its message holds every
// one of mentions.
func want(t *testing.T, what string, got server.PushResult, outcome keymountv1.Outcome, mentions ...string) {
	t.Helper()
	if got.Outcome != outcome {
		t.Fatalf("%s: %v (version %q, message %q), want %v", what, got.Outcome, got.Version, got.Message, outcome)
	}
	for _, m := range mentions {
		if !strings.Contains(got.Message, m) {
			t.Errorf("%s: message %q does not mention %q", what, got.Message, m)
		}
	}
}

func smTag(k, v string) smtypes.Tag {
	return smtypes.Tag{Key: awssdk.String(k), Value: awssdk.String(v)}
}

// tags returns the secret's tags.
func (e *pushEnv) tags(t *testing.T, name string) map[string]string {
	t.Helper()
	out, err := e.sm.DescribeSecret(t.Context(), &secretsmanager.DescribeSecretInput{SecretId: &name})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, tg := range out.Tags {
		m[awssdk.ToString(tg.Key)] = awssdk.ToString(tg.Value)
	}
	return m
}

type pushItem = server.PushItem
