package vault

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	vaultapi "github.com/hashicorp/vault/api"

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
