package e2e

import (
	"os"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

// TestPodCannotRewriteSyncedSecret: a pod author who may create pods but
// not write Secrets tries to change what a class that syncs a Secret other
// workloads read fetches, through the pod's volumeAttributes, which the
// upstream driver lays over the class's parameters. Overriding the class's
// objects, or adding a parameter the class does not set, fails the publish
// with InvalidArgument naming the key, mounts nothing, tells the pod why,
// and leaves the synced Secret as the class made it. A class that syncs
// nothing keeps upstream's overlay: the pod changes its own volume only.
func TestPodCannotRewriteSyncedSecret(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	password := []byte("pw-" + randomHex(8))
	planted := []byte("planted-" + randomHex(8))
	n.writeObject(t, "db/password", password)
	n.writeObject(t, "scratch/value", planted) // a file the pod author chose
	n.createClass(t, ns, "db", "local", []object{{name: "db/password", alias: "password"}},
		&secretsstorev1.SecretObject{
			SecretName: "db", Type: string(corev1.SecretTypeOpaque),
			Data: []*secretsstorev1.SecretObjectData{{ObjectName: "password", Key: "password"}},
		})
	web := n.createPod(t, ns, "web", secretsVolume{name: "secrets", class: "db"})
	n.mustPublish(t, web, "secrets")
	n.s.waitForSecret(t, ns, "db", syncedMeta("db", web), hasData(map[string][]byte{"password": password}))

	hijack := objectsParameter(t, object{name: "scratch/value", alias: "password"})
	tests := []struct {
		pod   string
		attrs map[string]string
		want  string
	}{
		{pod: "override", attrs: map[string]string{"objects": hijack}, want: `volume attribute "objects" would override parameter "objects" of SecretProviderClass ` + ns + `/db`},
		{pod: "addition", attrs: map[string]string{"root": "/"}, want: `volume attribute "root" is not a parameter of SecretProviderClass ` + ns + `/db`},
	}
	for _, tc := range tests {
		t.Run(tc.pod, func(t *testing.T) {
			pod := n.createPod(t, ns, tc.pod, secretsVolume{name: "secrets", class: "db", attributes: tc.attrs})
			before := slices.Sorted(slices.Values(mountsUnder(t, n.dir))) // web's volume stays mounted
			err := n.publish(t, pod, "secrets")
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Fatalf("NodePublishVolume = %v, want InvalidArgument saying %q", err, tc.want)
			}
			if _, err := os.Lstat(n.targetPath(pod, "secrets")); !os.IsNotExist(err) {
				t.Errorf("a refused publish left the target behind (%v)", err)
			}
			if after := slices.Sorted(slices.Values(mountsUnder(t, n.dir))); !slices.Equal(after, before) {
				t.Errorf("a refused publish changed the mounts: %v, before %v", after, before)
			}
			// The event is written after the outcome reached the cluster
			// side: whatever the refused publish could sync, it has.
			n.s.waitForEvent(t, pod, corev1.EventTypeWarning, "SecretMountFailed", tc.want)
			sec := n.s.secret(t, ns, "db")
			if sec == nil || string(sec.Data["password"]) != string(password) {
				t.Errorf("Secret db after the refused publish: %v, want the class's password", sec)
			}
			if st := n.s.podStatus(t, pod, "db"); st != nil {
				t.Errorf("a refused publish created pod status %s", st.Name)
			}
		})
	}

	// The same override against a class without secretObjects: upstream's
	// overlay, the pod's own volume holds what it asked for.
	n.createClass(t, ns, "mine", "local", []object{{name: "db/password", alias: "password"}})
	own := n.createPod(t, ns, "own", secretsVolume{name: "secrets", class: "mine", attributes: map[string]string{"objects": hijack}})
	n.mustPublish(t, own, "secrets")
	if got := readFile(t, n.targetPath(own, "secrets"), "password"); got != string(planted) {
		t.Errorf("password of a pod overriding a class that syncs nothing = %q, want the pod's choice", got)
	}
	n.s.waitForSecret(t, ns, "db", hasData(map[string][]byte{"password": password}))
	n.mustUnpublish(t, own, "secrets")
	n.mustUnpublish(t, web, "secrets")
}
