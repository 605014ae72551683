package aws_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/keymount/keymount/provider/aws"
	"github.com/keymount/keymount/provider/aws/noderegion"
	"github.com/keymount/keymount/provider/aws/push"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/provider/server"
)

// TestPushAWSErrors: an item AWS refuses fails alone, its message naming
// the remote key and AWS's error code; credentials AWS refused are
// forgotten, as after a mount, and others are kept. (A fake: moto accepts
// any credentials.)
func TestPushAWSErrors(t *testing.T) {
	for _, tc := range []struct {
		code   string
		forget bool
	}{
		{"ExpiredTokenException", true},
		{"AccessDeniedException", true},
		{"InternalServiceError", false},
	} {
		t.Run(tc.code, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/x-amz-json-1.1")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = fmt.Fprintf(w, `{"__type":%q,"message":"no"}`, tc.code)
			}))
			t.Cleanup(srv.Close)
			e := newPushEnvAt(t, srv.URL)
			res := e.push(t, item("app/db", "the-value"))
			want(t, tc.code, res[0], failedOut, `"app/db"`, "DescribeSecret failed: "+tc.code)
			if forgot := len(e.ids.forgot) == 1 && e.ids.forgot[0] == "shop/pusher"; forgot != tc.forget {
				t.Errorf("forgot %v after %s, want forgotten: %v", e.ids.forgot, tc.code, tc.forget)
			}
		})
	}
}

// TestPushRefusesPodIdentity: EKS Pod Identity credentials are a pod's,
// and a push has no pod: the request is refused before any AWS call.
func TestPushRefusesPodIdentity(t *testing.T) {
	tokens, _ := newVerifier(t)
	ids := &recordingIdentity{}
	p, err := aws.New(noderegion.New(noderegion.Config{}, nil), tokens, ids, store.New(store.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	u, err := aws.NewPusher(p, push.New(push.Config{Endpoint: "http://127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = u.Push(t.Context(), &server.PushRequest{
		Attributes: map[string]string{spec.KeyRegion: region, spec.KeyUsePodIdentity: "true", spec.KeyPodNamespace: "shop", spec.KeyServiceAccount: "pusher"},
		Items:      []server.PushItem{item("app/db", "v")},
	})
	if !errors.Is(err, server.ErrFailedPrecondition) || len(ids.asked) != 0 {
		t.Errorf("Push with usePodIdentity: %v (identities asked %v), want FailedPrecondition before any", err, ids.asked)
	}
}
