package vault

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/keymount/keymount/internal/tlsbundle/tlsbundletest"
	"github.com/keymount/keymount/provider/vault/spec"
)

// lateBody is an answer whose bytes arrive only as it is read, as a large
// answer (an issued certificate) does: a read after the request's context
// ended fails, as on a real connection.
type lateBody struct {
	ctx context.Context
	r   io.Reader
}

func (b *lateBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return b.r.Read(p)
}

func (b *lateBody) Close() error { return nil }

// lateTransport answers every request with a lateBody of body.
type lateTransport struct{ body string }

func (tr lateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: &lateBody{ctx: req.Context(), r: strings.NewReader(tr.body)}, Request: req}, nil
}

// TestRequestReadsTheAnswerOfAWrite: a PUT's answer (PKI issue) is read
// whole. With the Vault client's own Timeout, Logical().WriteRaw ended the
// request's context before the body was read: "context canceled".
func TestRequestReadsTheAnswerOfAWrite(t *testing.T) {
	cfg, err := clientConfig("http://127.0.0.1:8200", spec.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HttpClient.Timeout != requestTimeout {
		t.Errorf("HTTP client timeout %v, want %v (the bound on a request, its answer included)", cfg.HttpClient.Timeout, requestTimeout)
	}
	const body = `{"lease_id":"","data":{"certificate":"-----BEGIN CERTIFICATE-----","expiration":4102444800}}`
	cfg.HttpClient.Transport = lateTransport{body: body}
	cl, err := vaultapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{spec.MethodPut, spec.MethodGet} {
		ans, err := request(t.Context(), cl, &spec.Object{Name: "cert", Path: "pki/issue/web", Method: method,
			Args: map[string]any{"common_name": "a.example.com"}})
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if string(ans.raw) != body {
			t.Errorf("%s: answer %q, want %q", method, ans.raw, body)
		}
	}
}

// TestInlineCACert: a class's vaultCACertPEM is the CA the client trusts:
// a Vault on 127.0.0.1 with a certificate of that CA answers; without it,
// or with another CA, the TLS handshake fails.
func TestInlineCACert(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"initialized":true,"sealed":false,"standby":false}`)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	otherPEM := string(tlsbundletest.CertPEM(tlsbundletest.NewChain(t).CA))

	health := func(attrs map[string]string) error {
		t.Helper()
		attrs[spec.KeyRole] = "web"
		attrs[spec.KeyObjects] = "- objectName: a\n  secretPath: secret/data/a\n"
		s, err := spec.Defaults{}.Parse(attrs, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientConfig(srv.URL, s.TLS)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := vaultapi.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.Sys().HealthWithContext(t.Context())
		return err
	}
	if err := health(map[string]string{spec.KeyCACertPEM: caPEM}); err != nil {
		t.Errorf("with the server's CA inline: %v", err)
	}
	for name, attrs := range map[string]map[string]string{
		"no CA":      {},
		"another CA": {spec.KeyCACertPEM: otherPEM},
	} {
		if err := health(attrs); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: %v, want a certificate error", name, err)
		}
	}
}
