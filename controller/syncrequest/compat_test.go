package syncrequest_test

import (
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/controller/tokens"
	"github.com/keymount/keymount/provider/aws/spec"
)

// TestAWSProviderReadsRequest: keymount's AWS provider parses a request
// built from tokens.Manager's attribute: the SecretSync's identity and the
// token for its audience.
func TestAWSProviderReadsRequest(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok {
			return true, nil, errors.New("not a create")
		}
		in, ok := ca.GetObject().(*authenticationv1.TokenRequest)
		if !ok {
			return true, nil, errors.New("not a TokenRequest")
		}
		tr := in.DeepCopy()
		tr.Status = authenticationv1.TokenRequestStatus{
			Token:               "token-for-" + tr.Spec.Audiences[0],
			ExpirationTimestamp: metav1.NewTime(time.Now().Add(10 * time.Minute)),
		}
		return true, tr, nil
	})
	m, err := tokens.NewManager(cs.CoreV1(), tokens.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := m.Tokens(t.Context(), "team-a", "app", []string{"sts.amazonaws.com"})
	if err != nil {
		t.Fatal(err)
	}
	req, err := syncrequest.Build(syncrequest.Input{
		Parameters:         map[string]string{"region": "eu-west-1", "objects": "- objectName: db\n  objectType: secretsmanager\n"},
		Namespace:          "team-a",
		ServiceAccountName: "app",
		Pod:                syncrequest.Pod{Name: "keymount-controller-0", UID: "uid-0"},
		Tokens:             tok,
	})
	if err != nil {
		t.Fatal(err)
	}
	var attrs map[string]string
	if err := json.Unmarshal([]byte(req.GetAttributes()), &attrs); err != nil {
		t.Fatal(err)
	}
	var mode uint64
	if mode, err = strconv.ParseUint(req.GetPermission(), 10, 32); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Parse(attrs, os.FileMode(mode))
	if err != nil {
		t.Fatalf("the AWS provider refuses the request: %v", err)
	}
	if s.Namespace != "team-a" || s.ServiceAccount != "app" || s.Tokens["sts.amazonaws.com"] != "token-for-sts.amazonaws.com" {
		t.Errorf("the AWS provider read namespace %q, service account %q, %d tokens; want team-a, app, the token",
			s.Namespace, s.ServiceAccount, len(s.Tokens))
	}
}
