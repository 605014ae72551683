package store_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/keymount/keymount/tests/motoserver"
)

// fakeAWS is an in-process endpoint speaking the AWS JSON 1.1 protocol of
// Secrets Manager and SSM, for what moto cannot do: throttling, 5xx, slow
// answers and counting calls. Every secret "s<i>" and parameter "p<i>"
// exists with value "<name>@<version>" unless listed in missing; its staging
// labels AWSCURRENT and "blue" point at the current version.
type fakeAWS struct {
	url string

	// fault, when set, may answer a call instead of the default handler:
	// it returns the HTTP status and body, or 0 to fall through.
	fault func(call fakeCall) (int, any)

	mu      sync.Mutex
	version map[string]string // name -> current version
	missing map[string]bool
	// known is every secret a call has read or named (ListSecrets lists
	// those, not missing).
	known map[string]bool
	calls []fakeCall
	total atomic.Int64
}

// fakeCall is one request the fake received.
type fakeCall struct {
	Region    string
	Target    string // e.g. "secretsmanager.BatchGetSecretValue"
	Names     []string
	AccessKey string // the access key id that signed the call
	// Prefixes are the values of a ListSecrets "name" filter; Page its
	// NextToken and PageSize its MaxResults.
	Prefixes []string
	Page     string
	PageSize int
	// Invocation is the SDK's id of the operation (its retries share it).
	Invocation string
}

var (
	regionRE    = regexp.MustCompile(`Credential=[^/]+/[^/]+/([^/]+)/`)
	accessKeyRE = regexp.MustCompile(`Credential=([^/]+)/`)
)

func newFakeAWS(t testing.TB) *fakeAWS {
	t.Helper()
	f := &fakeAWS{version: map[string]string{}, missing: map[string]bool{}, known: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *fakeAWS) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		SecretIDList []string `json:"SecretIdList"`
		SecretID     string   `json:"SecretId"`
		Names        []string
		Filters      []struct {
			Key    string
			Values []string
		}
		MaxResults int
		NextToken  string
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	call := fakeCall{Target: r.Header.Get("X-Amz-Target")}
	if m := regionRE.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		call.Region = m[1]
	}
	if m := accessKeyRE.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		call.AccessKey = m[1]
	}
	call.Names = append(append([]string{}, body.SecretIDList...), body.Names...)
	if body.SecretID != "" {
		call.Names = append(call.Names, body.SecretID)
	}
	for _, flt := range body.Filters {
		if flt.Key == "name" {
			call.Prefixes = append(call.Prefixes, flt.Values...)
		}
	}
	call.Page, call.PageSize = body.NextToken, body.MaxResults
	call.Invocation = r.Header.Get("Amz-Sdk-Invocation-Id")
	f.total.Add(1)
	f.mu.Lock()
	f.calls = append(f.calls, call)
	fault := f.fault
	f.mu.Unlock()

	code, resp := 0, any(nil)
	if fault != nil {
		code, resp = fault(call)
	}
	if code == 0 {
		code, resp = f.answer(call)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(resp)
}

func (f *fakeAWS) current(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.version[name]; ok {
		return v
	}
	return "1"
}

func (f *fakeAWS) isMissing(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.missing[name]
}

// set changes the current version of name.
func (f *fakeAWS) set(name, version string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version[name] = version
}

func (f *fakeAWS) answer(call fakeCall) (int, any) {
	if strings.HasPrefix(call.Target, "secretsmanager.") {
		f.mu.Lock()
		for _, n := range call.Names {
			f.known[n] = true
		}
		f.mu.Unlock()
	}
	switch call.Target {
	case "secretsmanager.BatchGetSecretValue":
		values, errs := []map[string]any{}, []map[string]any{}
		for _, n := range call.Names {
			if f.isMissing(n) {
				errs = append(errs, map[string]any{"SecretId": n, "ErrorCode": "ResourceNotFoundException"})
				continue
			}
			values = append(values, secretJSON(n, f.current(n)))
		}
		return http.StatusOK, map[string]any{"SecretValues": values, "Errors": errs}
	case "secretsmanager.GetSecretValue":
		n := call.Names[0]
		if f.isMissing(n) {
			return apiError("ResourceNotFoundException")
		}
		return http.StatusOK, secretJSON(n, f.current(n))
	case "secretsmanager.DescribeSecret":
		// The staging label "blue" follows the current version in the fake.
		n := call.Names[0]
		if f.isMissing(n) {
			return apiError("ResourceNotFoundException")
		}
		return http.StatusOK, map[string]any{
			"Name": n, "ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:" + n,
			"VersionIdsToStages": map[string][]string{f.current(n): {"AWSCURRENT", "blue"}},
		}
	case "secretsmanager.ListSecrets":
		return f.list(call)
	case "AmazonSSM.GetParameters":
		params, invalid := []map[string]any{}, []string{}
		for _, n := range call.Names {
			if f.isMissing(n) {
				invalid = append(invalid, n)
				continue
			}
			v := f.current(n)
			params = append(params, map[string]any{"Name": n, "Type": "String", "Value": n + "@" + v, "Version": json.Number(v)})
		}
		return http.StatusOK, map[string]any{"Parameters": params, "InvalidParameters": invalid}
	default:
		return http.StatusBadRequest, map[string]any{"__type": "UnknownOperationException"}
	}
}

// list answers ListSecrets: the known secrets that are not missing, whose
// names start with a prefix (without case, as AWS), sorted, paged by
// PageSize with the index of the next entry as the token.
func (f *fakeAWS) list(call fakeCall) (int, any) {
	f.mu.Lock()
	var names []string
	for n := range f.known {
		if f.missing[n] {
			continue
		}
		if len(call.Prefixes) == 0 || slices.ContainsFunc(call.Prefixes, func(p string) bool {
			return strings.HasPrefix(strings.ToLower(n), strings.ToLower(p))
		}) {
			names = append(names, n)
		}
	}
	f.mu.Unlock()
	slices.Sort(names)
	start, size := 0, call.PageSize
	if size <= 0 {
		size = 100
	}
	_, _ = fmt.Sscan(call.Page, &start)
	end := min(start+size, len(names))
	entries := []map[string]any{}
	for _, n := range names[start:end] {
		entries = append(entries, map[string]any{
			"Name": n, "ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:" + n + "-AbCdEf",
			"SecretVersionsToStages": map[string][]string{f.current(n): {"AWSCURRENT", "blue"}},
		})
	}
	out := map[string]any{"SecretList": entries}
	if end < len(names) {
		out["NextToken"] = fmt.Sprint(end)
	}
	return http.StatusOK, out
}

func secretJSON(name, version string) map[string]any {
	return map[string]any{
		"Name": name, "ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:" + name,
		"VersionId": version, "SecretString": name + "@" + version,
	}
}

// apiError is an AWS JSON error answer: 400 with __type, 5xx otherwise.
func apiError(typ string) (int, any) {
	code := http.StatusBadRequest
	if strings.HasPrefix(typ, "5") {
		_, _ = fmt.Sscan(typ, &code)
		typ = "InternalServiceError"
	}
	return code, map[string]any{"__type": typ, "message": "injected"}
}

// count is the number of calls received; byTarget counts them per target
// and region ("AmazonSSM.GetParameters@us-east-1").
func (f *fakeAWS) count() int { return int(f.total.Load()) }

func (f *fakeAWS) byTarget() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, c := range f.calls {
		out[c.Target+"@"+c.Region]++
	}
	return out
}

// ops counts operations per target and region, as byTarget does requests:
// an SDK retry is the same operation. (The SDK retries, rarely, a
// ListSecrets whose answer of more than 4 KiB it failed to read from the
// fake: "use of closed network connection".)
func (f *fakeAWS) ops() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[string]bool{}
	out := map[string]int{}
	for _, c := range f.calls {
		if c.Invocation == "" || !seen[c.Invocation] {
			seen[c.Invocation] = true
			out[c.Target+"@"+c.Region]++
		}
	}
	return out
}

func (f *fakeAWS) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
	f.total.Store(0)
}

func fakeCreds() aws.CredentialsProvider { return motoserver.Credentials() }
