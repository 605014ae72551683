package identity

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
)

// countingTransport counts the requests sent through it and remembers the
// form of the last one.
type countingTransport struct {
	next  http.RoundTripper
	calls atomic.Int64

	mu   sync.Mutex
	form url.Values
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	if req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
		form, err := url.ParseQuery(string(body))
		if err == nil {
			c.mu.Lock()
			c.form = form
			c.mu.Unlock()
		}
	}
	return c.next.RoundTrip(req)
}

func (c *countingTransport) lastForm() url.Values {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.form
}

// countingClient returns an HTTP client whose requests are counted.
func countingClient() (*http.Client, *countingTransport) {
	t := &countingTransport{next: http.DefaultTransport}
	return &http.Client{Transport: t}, t
}

// fakeServiceAccounts maps "namespace/name" to a role ARN and counts reads.
type fakeServiceAccounts struct {
	roles map[string]string
	calls atomic.Int64
}

func (f *fakeServiceAccounts) RoleARN(_ context.Context, namespace, name string) (string, error) {
	f.calls.Add(1)
	arn, ok := f.roles[namespace+"/"+name]
	if !ok {
		return "", fmt.Errorf("%w: %s/%s", ErrMissingRoleARN, namespace, name)
	}
	return arn, nil
}

var _ ServiceAccountReader = (*fakeServiceAccounts)(nil)
