package aws_test

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keymount/keymount/internal/satoken/satokentest"
)

// fakeAWS is an in-process AWS on 127.0.0.1 for a cold start: STS
// AssumeRoleWithWebIdentity (query protocol, XML answer) and Secrets
// Manager BatchGetSecretValue / GetSecretValue (JSON 1.1), serving any
// secret name with a small JSON value. It counts what it answers and the
// most STS requests it held at once.
type fakeAWS struct {
	url string

	sts, smBatch, smGet atomic.Int64
	// signers counts the store requests by the access key that signed them.
	signersMu   sync.Mutex
	signers     map[string]int
	stsInFlight atomic.Int64
	stsPeak     atomic.Int64

	// stsBarrier, when set, holds each STS request until that many are in
	// flight together (or the deadline passes, which fails the request):
	// it proves identities are exchanged concurrently.
	stsBarrier int64
	barrier    chan struct{}
	barrierHit atomic.Bool
}

func newFakeAWS(tb testing.TB) *fakeAWS {
	tb.Helper()
	f := &fakeAWS{barrier: make(chan struct{}), signers: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	tb.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *fakeAWS) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		f.serveSTS(w, r)
		return
	}
	var in struct {
		SecretIDList []string `json:"SecretIdList"`
		SecretID     string   `json:"SecretId"`
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	f.countSigner(r)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	switch r.Header.Get("X-Amz-Target") {
	case "secretsmanager.BatchGetSecretValue":
		f.smBatch.Add(1)
		values := make([]map[string]any, 0, len(in.SecretIDList))
		for _, n := range in.SecretIDList {
			values = append(values, coldSecret(n))
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"SecretValues": values, "Errors": []any{}})
	case "secretsmanager.GetSecretValue":
		f.smGet.Add(1)
		_ = json.NewEncoder(w).Encode(coldSecret(in.SecretID))
	default:
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"__type": "UnknownOperationException"})
	}
}

// countSigner counts a store request under the access key ID of its
// SigV4 Authorization header.
func (f *fakeAWS) countSigner(r *http.Request) {
	_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	key, _, _ := strings.Cut(cred, "/")
	f.signersMu.Lock()
	defer f.signersMu.Unlock()
	f.signers[key]++
}

// signedBy is how many store requests key signed.
func (f *fakeAWS) signedBy(key string) int {
	f.signersMu.Lock()
	defer f.signersMu.Unlock()
	return f.signers[key]
}

func coldSecret(name string) map[string]any {
	return map[string]any{
		"Name": name, "ARN": "arn:aws:secretsmanager:" + region + ":123456789012:secret:" + name,
		"VersionId": "v1", "SecretString": `{"name":"` + name + `","password":"not-a-real-one"}`,
	}
}

// stsAnswer is the XML of an AssumeRoleWithWebIdentity answer.
type stsAnswer struct {
	XMLName xml.Name `xml:"AssumeRoleWithWebIdentityResponse"`
	Result  struct {
		Credentials struct {
			AccessKeyID     string `xml:"AccessKeyId"`
			SecretAccessKey string `xml:"SecretAccessKey"`
			SessionToken    string `xml:"SessionToken"`
			Expiration      string `xml:"Expiration"`
		} `xml:"Credentials"`
		AssumedRoleUser struct {
			Arn           string `xml:"Arn"`
			AssumedRoleID string `xml:"AssumedRoleId"`
		} `xml:"AssumedRoleUser"`
	} `xml:"AssumeRoleWithWebIdentityResult"`
}

func (f *fakeAWS) serveSTS(w http.ResponseWriter, r *http.Request) {
	n := f.stsInFlight.Add(1)
	defer f.stsInFlight.Add(-1)
	for {
		peak := f.stsPeak.Load()
		if n <= peak || f.stsPeak.CompareAndSwap(peak, n) {
			break
		}
	}
	f.sts.Add(1)
	if err := r.ParseForm(); err != nil || r.PostForm.Get("Action") != "AssumeRoleWithWebIdentity" {
		http.Error(w, "unexpected STS request", http.StatusBadRequest)
		return
	}
	if f.stsBarrier > 0 && !f.waitBarrier(n) {
		http.Error(w, "STS requests did not arrive together", http.StatusServiceUnavailable)
		return
	}
	var a stsAnswer
	c := &a.Result.Credentials
	role := r.PostForm.Get("RoleArn")
	c.AccessKeyID = fmt.Sprintf("ASIAFAKE%012d", f.sts.Load())
	c.SecretAccessKey, c.SessionToken = "fake-secret-key", "fake-session-token"
	c.Expiration = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	a.Result.AssumedRoleUser.Arn = strings.Replace(strings.Replace(role, ":iam:", ":sts:", 1), ":role/", ":assumed-role/", 1) +
		"/" + r.PostForm.Get("RoleSessionName")
	a.Result.AssumedRoleUser.AssumedRoleID = "AROAFAKE:" + r.PostForm.Get("RoleSessionName")
	w.Header().Set("Content-Type", "text/xml")
	_ = xml.NewEncoder(w).Encode(&a)
}

// waitBarrier holds a request until stsBarrier are in flight.
func (f *fakeAWS) waitBarrier(inFlight int64) bool {
	if inFlight >= f.stsBarrier && f.barrierHit.CompareAndSwap(false, true) {
		close(f.barrier)
	}
	select {
	case <-f.barrier:
		return true
	case <-time.After(time.Minute):
		return false
	}
}

// fakeKube is an API server on 127.0.0.1 that serves ServiceAccount GETs
// (every service account exists, annotated with the role "role-<name>")
// and, from its issuer, the service account issuer's discovery, keys and
// TokenReviews. reads counts the ServiceAccount GETs, requests everything.
type fakeKube struct {
	url      string
	issuer   *satokentest.Issuer
	reads    atomic.Int64
	requests atomic.Int64
}

func newFakeKube(tb testing.TB) *fakeKube {
	tb.Helper()
	k := &fakeKube{issuer: satokentest.New(tb, "https://kubernetes.default.svc.cluster.local")}
	srv := httptest.NewServer(http.HandlerFunc(k.serve))
	tb.Cleanup(srv.Close)
	k.url = srv.URL
	return k
}

func (k *fakeKube) serve(w http.ResponseWriter, r *http.Request) {
	k.requests.Add(1)
	if satokentest.Handles(r) {
		k.issuer.ServeHTTP(w, r)
		return
	}
	// /api/v1/namespaces/<ns>/serviceaccounts/<name>
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Method != http.MethodGet || len(parts) != 6 || parts[2] != "namespaces" || parts[4] != "serviceaccounts" {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
		return
	}
	k.reads.Add(1)
	ns, name := parts[3], parts[5]
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{
			"name": name, "namespace": ns,
			"annotations": map[string]string{"eks.amazonaws.com/role-arn": roleOf(name)},
		},
	})
}

// roleOf is the role the fake annotates service account name with.
func roleOf(name string) string { return "arn:aws:iam::123456789012:role/role-" + name }
