package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/tests/nodeenv"
	"github.com/keymount/keymount/tests/poll"
)

// Volume attributes kubelet adds (podInfoOnMount, tokenRequests).
const (
	attrTokens  = "csi.storage.k8s.io/serviceAccount.tokens"
	attrPodName = "csi.storage.k8s.io/pod.name"
	attrPodUID  = "csi.storage.k8s.io/pod.uid"
)

// tokenReviewer is a provider that checks, with the TokenReview API, the
// token kubelet minted for the volume, and mounts one file saying what the
// review found. It never writes the token anywhere.
type tokenReviewer struct {
	kube kubernetes.Interface

	mu     sync.Mutex
	tokens int
}

func (p *tokenReviewer) Mount(ctx context.Context, req *server.MountRequest) (*server.MountResult, error) {
	var tokens map[string]struct {
		Token               string `json:"token"`
		ExpirationTimestamp string `json:"expirationTimestamp"`
	}
	if err := json.Unmarshal([]byte(req.Attributes[attrTokens]), &tokens); err != nil {
		return nil, fmt.Errorf("%w: attribute %s: %w", server.ErrInvalidParameters, attrTokens, err)
	}
	tok, ok := tokens[tokenAudience]
	if !ok || tok.Token == "" {
		return nil, fmt.Errorf("%w: no token for audience %s", server.ErrInvalidParameters, tokenAudience)
	}
	forbidden.add(tok.Token, "a service-account token kubelet minted")
	// The signature alone must not leak either.
	if i := strings.LastIndexByte(tok.Token, '.'); i > 0 && len(tok.Token)-i > 16 {
		forbidden.add(tok.Token[i+1:], "the signature of a service-account token")
	}
	p.mu.Lock()
	p.tokens++
	p.mu.Unlock()

	review, err := p.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: tok.Token, Audiences: []string{tokenAudience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token review: %w", err)
	}
	st := review.Status
	boundPod := strings.Join(st.User.Extra["authentication.kubernetes.io/pod-name"], ",")
	boundUID := strings.Join(st.User.Extra["authentication.kubernetes.io/pod-uid"], ",")
	verdict := fmt.Sprintf("authenticated=%t user=%s audiences=%s pod=%t",
		st.Authenticated, st.User.Username, strings.Join(st.Audiences, ","),
		boundPod == req.Attributes[attrPodName] && boundUID == req.Attributes[attrPodUID] && boundUID != "")
	return &server.MountResult{
		Files:    []server.File{{Path: "review", Mode: 0o644, Contents: []byte(verdict)}},
		Versions: []server.ObjectVersion{{ID: "review", Version: "1"}},
	}, nil
}

// TestProviderGetsPodBoundToken: the CSIDriver's tokenRequests make kubelet
// mint a token for the configured audience, bound to the pod, and the
// driver hands it to the provider; no log of the node ever holds it (the
// scan after the node stopped checks every log).
func TestProviderGetsPodBoundToken(t *testing.T) {
	t.Parallel()
	n := node(t)
	checkProviderGetsBoundToken(t, n, namespace(t, n))
}

// checkProviderGetsBoundToken serves the token-reviewing provider on the
// node and checks that a pod of namespace ns gets its review: kubelet
// minted a token of tokenAudience bound to the pod and the driver handed it
// to the provider.
func checkProviderGetsBoundToken(t *testing.T, n *nodeenv.Node, ns string) {
	t.Helper()
	p := &tokenReviewer{kube: n.Kube}
	srv, err := server.New(server.Config{Name: "tokenreview", Version: "test", SocketDir: n.ProviderDir}, p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("token provider: %v", err)
		}
	})

	spc := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "review"},
		Spec:       secretsstorev1.SecretProviderClassSpec{Provider: "tokenreview"},
	}
	if err := n.Ctrl.Create(t.Context(), spc); err != nil {
		t.Fatal(err)
	}
	pod := createPod(t, n, ns, "bound", "review", "show", "-follow", mountPath+"/review")
	// The pod goes before its provider (cleanups run last first): a
	// mounted volume whose provider is gone keeps the driver not ready.
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context()) // t's context ends before its cleanups
		if err := n.Kube.CoreV1().Pods(ns).Delete(ctx, "bound", metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting pod bound: %v", err)
			return
		}
		err := poll.Wait(ctx, nodeenv.PodTimeout, func(ctx context.Context) (bool, error) {
			_, err := n.Kube.CoreV1().Pods(ns).Get(ctx, "bound", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("waiting until pod bound is gone: %v", err)
		}
	})
	n.WaitPod(t, ns, "bound", "Running", nodeenv.Running)
	want := fmt.Sprintf("authenticated=true user=system:serviceaccount:%s:default audiences=%s pod=true", ns, tokenAudience)
	n.WaitLog(t, pod, "probe", "the provider's token review", hasContent("review", want))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tokens == 0 {
		t.Error("the provider saw no token")
	}
}
