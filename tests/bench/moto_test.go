package bench_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keymount/keymount/tests/motoserver"
)

// motoRegion is the region of the benchmarks' AWS objects.
const motoRegion = "eu-west-1"

// awsEnv is the environment of the AWS provider: moto's fake static
// credentials, a region, no proxy, no shared config or instance metadata,
// so that nothing reaches a real AWS endpoint.
func awsEnv() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.TempDir(),
		"AWS_ACCESS_KEY_ID=" + motoserver.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + motoserver.SecretAccessKey,
		"AWS_REGION=" + motoRegion,
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
		"NO_PROXY=*",
	}
}

// storeCounter is a reverse proxy on 127.0.0.1 in front of moto that counts
// the requests going through it: Secrets Manager and SSM calls (JSON
// protocol, X-Amz-Target) apart from the rest (STS).
type storeCounter struct {
	url   string
	store atomic.Int64
	other atomic.Int64
}

// startStoreCounter serves the counting proxy to moto at endpoint until the
// benchmark ends.
func startStoreCounter(b *testing.B, endpoint string) *storeCounter {
	b.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		b.Fatal(err)
	}
	c := &storeCounter{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}
	// Requests still in flight when the provider stops are cancelled:
	// answer them 502 without logging.
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "" {
			c.store.Add(1)
		} else {
			c.other.Add(1)
		}
		proxy.ServeHTTP(w, r)
	})}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.Errorf("store counter: %v", err)
		}
	}()
	b.Cleanup(func() { _ = srv.Close() })
	c.url = "http://" + l.Addr().String()
	return c
}
