package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// TestBadClassFileFailsOnlyItsVolumes: with classes read from a directory
// (--class-path), a file holding a class with a mistyped field fails the
// volumes of that class with FailedPrecondition naming the file, the class,
// the field and the fix, and a file that does not parse at all fails none
// of the classes other files define: the volumes of the good class keep
// publishing and refreshing.
func TestBadClassFileFailsOnlyItsVolumes(t *testing.T) {
	n := newTestNode(t)
	dir := filepath.Join(n.base, "classes")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("app.yaml", "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nmetadata:\n  name: app\nspec:\n  provider: scripted\n")
	n.srv.d.deps.Classes = &class.FileResolver{Paths: []string{dir}}
	n.provider.files = []*v1alpha1.File{{Path: "password", Mode: 0o644, Contents: []byte("pw1")}}
	good := n.target("good")
	if err := n.publish(t, good); err != nil {
		t.Fatal(err)
	}

	typo := write("cache.yaml", "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nmetadata:\n  name: cache\n"+
		"spec:\n  provider: scripted\n  params:\n    a: b\n")
	write("broken.yaml", "kind: SecretProviderClass\nmetadata: [\n")

	n.provider.files[0].Contents = []byte("pw2")
	if err := n.publish(t, good); err != nil {
		t.Fatalf("refresh of the good class's volume beside bad files: %v", err)
	}
	if got := readTarget(t, good, "password"); got != "pw2" {
		t.Errorf("password after the refresh = %q, want pw2", got)
	}
	if err := n.publish(t, n.target("good2")); err != nil {
		t.Errorf("a new volume of the good class beside bad files: %v", err)
	}

	req := validRequest()
	req.TargetPath = n.target("cache")
	req.VolumeContext[AttrClass] = "cache"
	req.VolumeId = "csi-cache"
	_, err := n.srv.NodePublishVolume(t.Context(), req)
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("a volume of the mistyped class: %v, want FailedPrecondition", err)
	}
	for _, want := range []string{typo, `class "cache"`, `unknown field "params"`, "fix the file"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error %q lacks %q", msg, want)
		}
	}
	if _, err := os.Stat(req.TargetPath); !os.IsNotExist(err) {
		t.Errorf("target left behind after the failed publish (%v)", err)
	}
}
