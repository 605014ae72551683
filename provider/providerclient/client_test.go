package providerclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/poll"
)

func okMountRequest() *v1alpha1.MountRequest {
	return &v1alpha1.MountRequest{
		Attributes: `{"secretProviderClass":"db","csi.storage.k8s.io/pod.name":"web-0"}`,
		Secrets:    "{}",
		TargetPath: "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/secrets/mount",
		Permission: "420",
		CurrentObjectVersion: []*v1alpha1.ObjectVersion{
			{Id: "secret/db", Version: "2"},
		},
	}
}

// settings are the values New derives from a Config.
type settings struct {
	Dirs           []string
	Timeout        time.Duration
	MaxRecvMsgSize int
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
		want    settings
	}{
		{name: "no directories", cfg: Config{}, wantErr: "at least one provider directory"},
		{name: "relative directory", cfg: Config{Dirs: []string{"/etc/p", "var/run/p"}}, wantErr: `"var/run/p" is not an absolute path`},
		{name: "empty directory", cfg: Config{Dirs: []string{""}}, wantErr: "not an absolute path"},
		{name: "negative timeout", cfg: Config{Dirs: []string{"/p"}, Timeout: -time.Second}, wantErr: "negative timeout"},
		{name: "negative max receive size", cfg: Config{Dirs: []string{"/p"}, MaxRecvMsgSize: -1}, wantErr: "negative max receive size"},
		{
			name: "defaults",
			cfg:  Config{Dirs: []string{"/etc/kubernetes/secrets-store-csi-providers", "/var/run/secrets-store-csi-providers/"}},
			want: settings{
				Dirs:           []string{"/etc/kubernetes/secrets-store-csi-providers", "/var/run/secrets-store-csi-providers"},
				Timeout:        90 * time.Second,
				MaxRecvMsgSize: 4 << 20,
			},
		},
		{
			name: "explicit values",
			cfg:  Config{Dirs: []string{"/p"}, Timeout: time.Second, MaxRecvMsgSize: 16 << 20},
			want: settings{Dirs: []string{"/p"}, Timeout: time.Second, MaxRecvMsgSize: 16 << 20},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New() error = %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(): %v", err)
			}
			got := settings{Dirs: c.dirs, Timeout: c.timeout, MaxRecvMsgSize: c.maxRecvMsgSize}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("New() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewCopiesDirs(t *testing.T) {
	dirs := []string{"/a", "/b"}
	c, err := New(Config{Dirs: dirs})
	if err != nil {
		t.Fatal(err)
	}
	dirs[0] = "/changed"
	if c.dirs[0] != "/a" {
		t.Errorf("Client shares the caller's Dirs slice: dirs[0] = %q", c.dirs[0])
	}
}

func TestMount(t *testing.T) {
	dir := tempDir(t)
	p := serve(t, dir, "aws", &fakeProvider{})
	c := newClient(t, Config{Dirs: []string{dir}})

	resp, err := c.Mount(t.Context(), "aws", okMountRequest())
	if err != nil {
		t.Fatalf("Mount(): %v", err)
	}
	if diff := cmp.Diff([]*v1alpha1.MountRequest{okMountRequest()}, p.seenMountRequests(), protocmp.Transform()); diff != "" {
		t.Errorf("provider received (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(okResponse(), resp, protocmp.Transform()); diff != "" {
		t.Errorf("Mount() response (-want +got):\n%s", diff)
	}
}

// TestMountLegacyProvider checks that an empty files list is passed on: a
// legacy provider wrote the files itself.
func TestMountLegacyProvider(t *testing.T) {
	dir := tempDir(t)
	want := &v1alpha1.MountResponse{ObjectVersion: []*v1alpha1.ObjectVersion{{Id: "a", Version: "1"}}}
	serve(t, dir, "legacy", &fakeProvider{mount: func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		return want, nil
	}})
	c := newClient(t, Config{Dirs: []string{dir}})

	resp, err := c.Mount(t.Context(), "legacy", okMountRequest())
	if err != nil {
		t.Fatalf("Mount(): %v", err)
	}
	if diff := cmp.Diff(want, resp, protocmp.Transform()); diff != "" {
		t.Errorf("Mount() response (-want +got):\n%s", diff)
	}
}

func TestMountNilRequest(t *testing.T) {
	dir := tempDir(t)
	serve(t, dir, "aws", &fakeProvider{})
	c := newClient(t, Config{Dirs: []string{dir}})
	if _, err := c.Mount(t.Context(), "aws", nil); err == nil {
		t.Fatal("Mount(nil) succeeded; want an error")
	}
}

func TestVersion(t *testing.T) {
	dir := tempDir(t)
	p := serve(t, dir, "aws", &fakeProvider{runtime: "keymount-provider-aws"})
	c := newClient(t, Config{Dirs: []string{dir}})

	resp, err := c.Version(t.Context(), "aws")
	if err != nil {
		t.Fatalf("Version(): %v", err)
	}
	want := &v1alpha1.VersionResponse{Version: "v1alpha1", RuntimeName: "keymount-provider-aws", RuntimeVersion: "0.0.1"}
	if diff := cmp.Diff(want, resp, protocmp.Transform()); diff != "" {
		t.Errorf("Version() (-want +got):\n%s", diff)
	}
	wantReqs := []*v1alpha1.VersionRequest{{Version: "v1alpha1"}}
	if diff := cmp.Diff(wantReqs, p.seenVersionRequests(), protocmp.Transform()); diff != "" {
		t.Errorf("provider received (-want +got):\n%s", diff)
	}
}

// TestDirectoryWithURLCharacters checks that a directory name is used as a
// file name, never parsed as part of a URL.
func TestDirectoryWithURLCharacters(t *testing.T) {
	dir := tempDirPattern(t, "km%41?#x")
	serve(t, dir, "aws", &fakeProvider{})
	c := newClient(t, Config{Dirs: []string{dir}})
	if _, err := c.Mount(t.Context(), "aws", okMountRequest()); err != nil {
		t.Fatalf("Mount() with provider in %q: %v", dir, err)
	}
}

func TestConnectionReuse(t *testing.T) {
	dir := tempDir(t)
	p := serve(t, dir, "aws", &fakeProvider{})
	c := newClient(t, Config{Dirs: []string{dir}})

	for i := range 2 {
		if _, err := c.Mount(t.Context(), "aws", okMountRequest()); err != nil {
			t.Fatalf("Mount() #%d: %v", i+1, err)
		}
	}
	if _, err := c.Version(t.Context(), "aws"); err != nil {
		t.Fatalf("Version(): %v", err)
	}
	if n := p.lis.accepted.Load(); n != 1 {
		t.Errorf("provider accepted %d connections for three calls; want 1", n)
	}
}

func TestAuthority(t *testing.T) {
	dir := tempDir(t)
	p := serve(t, dir, "aws", &fakeProvider{})
	c := newClient(t, Config{Dirs: []string{dir}})

	if _, err := c.Mount(t.Context(), "aws", okMountRequest()); err != nil {
		t.Fatalf("Mount(): %v", err)
	}
	if _, err := c.Version(t.Context(), "aws"); err != nil {
		t.Fatalf("Version(): %v", err)
	}
	if diff := cmp.Diff([]string{"localhost", "localhost"}, p.seenAuthorities()); diff != "" {
		t.Errorf(":authority seen by the provider (-want +got):\n%s", diff)
	}
}

func TestConcurrentCalls(t *testing.T) {
	dir := tempDir(t)
	providers := map[string]*runningProvider{
		"aws":   serve(t, dir, "aws", &fakeProvider{runtime: "aws"}),
		"vault": serve(t, dir, "vault", &fakeProvider{runtime: "vault"}),
	}
	c := newClient(t, Config{Dirs: []string{dir}})

	const callers = 32
	var wg sync.WaitGroup
	errs := make(chan error, callers*2)
	for i := range callers {
		provider := "aws"
		if i%2 == 1 {
			provider = "vault"
		}
		wg.Go(func() {
			if _, err := c.Mount(t.Context(), provider, okMountRequest()); err != nil {
				errs <- fmt.Errorf("Mount(%s): %w", provider, err)
			}
			resp, err := c.Version(t.Context(), provider)
			if err != nil {
				errs <- fmt.Errorf("Version(%s): %w", provider, err)
			} else if resp.GetRuntimeName() != provider {
				errs <- fmt.Errorf("Version(%s) answered by %s", provider, resp.GetRuntimeName())
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for name, p := range providers {
		if n := p.lis.accepted.Load(); n != 1 {
			t.Errorf("provider %s accepted %d connections; want 1", name, n)
		}
	}
}

func TestClose(t *testing.T) {
	dir := tempDir(t)
	p := serve(t, dir, "aws", &fakeProvider{})
	c, err := New(Config{Dirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mount(t.Context(), "aws", okMountRequest()); err != nil {
		t.Fatalf("Mount(): %v", err)
	}
	if n := p.lis.open.Load(); n != 1 {
		t.Fatalf("provider has %d open connections before Close; want 1", n)
	}

	if err := c.Close(); err != nil {
		t.Fatalf("Close(): %v", err)
	}
	poll.UntilTrue(t, "the provider to see the connection closed", func() bool { return p.lis.open.Load() == 0 })

	if _, err := c.Mount(t.Context(), "aws", okMountRequest()); !errors.Is(err, ErrClosed) {
		t.Errorf("Mount() after Close: %v; want ErrClosed", err)
	}
	if _, err := c.Version(t.Context(), "aws"); !errors.Is(err, ErrClosed) {
		t.Errorf("Version() after Close: %v; want ErrClosed", err)
	}
	if _, err := c.Mount(t.Context(), "gone", okMountRequest()); !errors.Is(err, ErrClosed) {
		t.Errorf("Mount() of a missing provider after Close: %v; want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close(): %v", err)
	}
}
