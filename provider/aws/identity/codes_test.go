package identity

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/provider/aws/kubeclient/kubeclienttest"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/server"
)

// fakeSTS answers AssumeRoleWithWebIdentity with an error of the given
// HTTP status and AWS code.
func fakeSTS(t *testing.T, status int, code string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code>`+
			`<Message>refused</Message></Error><RequestId>r1</RequestId></ErrorResponse>`, code)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestIRSACodes: every IRSA failure reaches kubelet with the code of its
// cause, never Internal.
func TestIRSACodes(t *testing.T) {
	sas := &fakeServiceAccounts{roles: map[string]string{"ns/sa": roleA}}
	noRetry := &http.Client{}
	tests := []struct {
		name string
		sts  string
		spec func(*spec.Spec)
		want codes.Code
	}{
		{name: "no token for sts.amazonaws.com", spec: func(s *spec.Spec) { s.Tokens = nil }, want: codes.FailedPrecondition},
		{name: "no role annotation", spec: func(s *spec.Spec) { s.ServiceAccount = "bare" }, want: codes.FailedPrecondition},
		{name: "no service account in the volume context", spec: func(s *spec.Spec) { s.ServiceAccount = "" }, want: codes.FailedPrecondition},
		{name: "trust policy refuses", sts: fakeSTS(t, http.StatusForbidden, "AccessDenied"), want: codes.PermissionDenied},
		{name: "token refused", sts: fakeSTS(t, http.StatusBadRequest, "InvalidIdentityToken"), want: codes.PermissionDenied},
		{name: "token expired", sts: fakeSTS(t, http.StatusBadRequest, "ExpiredTokenException"), want: codes.PermissionDenied},
		{name: "malformed role ARN", sts: fakeSTS(t, http.StatusBadRequest, "ValidationError"), want: codes.FailedPrecondition},
		{name: "OIDC provider unreachable", sts: fakeSTS(t, http.StatusBadRequest, "IDPCommunicationError"), want: codes.Unavailable},
		{name: "STS failing", sts: fakeSTS(t, http.StatusInternalServerError, "InternalFailure"), want: codes.Unavailable},
		{name: "STS unreachable", sts: "http://127.0.0.1:1", want: codes.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			endpoint := tc.sts
			if endpoint == "" {
				endpoint = "http://127.0.0.1:1"
			}
			r := New(Config{STSEndpoint: endpoint, HTTPClient: noRetry}, sas)
			s := irsaSpec("ns", "sa", "p")
			if tc.spec != nil {
				tc.spec(s)
			}
			_, err := r.For(t.Context(), s)
			if got := server.Code(err); got != tc.want {
				t.Errorf("code %v, want %v: %v", got, tc.want, err)
			}
		})
	}
}

// TestPodIdentityCodes: the agent refusing the token is PermissionDenied,
// the agent failing or absent Unavailable.
func TestPodIdentityCodes(t *testing.T) {
	tests := []struct {
		name   string
		status int
		want   codes.Code
	}{
		{"refused", http.StatusForbidden, codes.PermissionDenied},
		{"bad token", http.StatusBadRequest, codes.PermissionDenied},
		{"throttled", http.StatusTooManyRequests, codes.Unavailable},
		{"failing", http.StatusInternalServerError, codes.Unavailable},
		{"malformed answer", http.StatusOK, codes.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(`{"code":"X","message":"no"`))
			}))
			t.Cleanup(srv.Close)
			r := New(Config{PodIdentityEndpointIPv4: srv.URL}, &fakeServiceAccounts{})
			_, err := r.For(t.Context(), podSpec("ns", "sa", spec.AddressIPv4))
			if got := server.Code(err); got != tc.want {
				t.Errorf("code %v, want %v: %v", got, tc.want, err)
			}
		})
	}
	t.Run("agent absent", func(t *testing.T) {
		r := New(Config{PodIdentityEndpointIPv4: "http://127.0.0.1:1/v1/credentials", PodIdentityEndpointIPv6: "http://[::1]:1/v1/credentials"}, &fakeServiceAccounts{})
		_, err := r.For(t.Context(), podSpec("ns", "sa", spec.AddressAuto))
		if got := server.Code(err); got != codes.Unavailable {
			t.Errorf("code %v, want Unavailable: %v", got, err)
		}
	})
	t.Run("no token for pods.eks.amazonaws.com", func(t *testing.T) {
		s := podSpec("ns", "sa", spec.AddressIPv4)
		s.Tokens = nil
		_, err := New(Config{}, &fakeServiceAccounts{}).For(t.Context(), s)
		if got := server.Code(err); got != codes.FailedPrecondition {
			t.Errorf("code %v, want FailedPrecondition: %v", got, err)
		}
	})
}

// TestServiceAccountReadCodes: the provider's RBAC missing is
// FailedPrecondition, the API server failing Unavailable.
func TestServiceAccountReadCodes(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want codes.Code
	}{
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, "sa", errors.New("RBAC")), codes.FailedPrecondition},
		{"not found", apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, "sa"), codes.FailedPrecondition},
		{"unavailable", apierrors.NewServiceUnavailable("shutting down"), codes.Unavailable},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), codes.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset()
			c.PrependReactor("get", "serviceaccounts", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			_, err := NewKubeServiceAccounts(kubeclienttest.Wrap(c), 0).RoleARN(t.Context(), "ns", "sa")
			if got := server.Code(err); got != tc.want {
				t.Errorf("code %v, want %v: %v", got, tc.want, err)
			}
		})
	}
}
