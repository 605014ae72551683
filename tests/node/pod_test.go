package node_test

import (
	"strings"
	"testing"

	"github.com/keymount/keymount/tests/nodeenv"
)

// TestPodReadsItsSecrets: a pod with an inline secrets-store volume of the
// local provider reaches Running and its container prints the files, and a
// Job whose pod reads the same class completes.
func TestPodReadsItsSecrets(t *testing.T) {
	t.Parallel()
	n := node(t)
	ns := namespace(t, n)
	password, user := "pw-"+randomHex(8), "user-"+randomHex(4)
	putObject(t, n, ns+"/db/password", password)
	putObject(t, n, ns+"/db/user", user)
	localClass(t, n, ns, "db", `
- objectName: `+ns+`/db/password
  objectAlias: password
- objectName: `+ns+`/db/user
  objectAlias: nested/user
`)

	pod := createPod(t, n, ns, "app", "db", "show", "-follow", mountPath+"/password", mountPath+"/nested/user")
	n.WaitPod(t, ns, "app", "Running", nodeenv.Running)
	n.WaitLog(t, pod, "probe", "the password", hasContent("password", password))
	n.WaitLog(t, pod, "probe", "the user", hasContent("nested/user", user))

	// A Job: the pod reads the files once and exits 0.
	lines := runJob(t, n, ns, "reader", "db", "show", mountPath+"/password")
	if !containsFunc(lines, hasContent("password", password)) {
		t.Errorf("the Job's container printed %q, want the password", lines)
	}
}

// TestVolumeIsReadOnly: a container that tries to write into the volume
// fails with EROFS, and the file it tried to write does not exist.
func TestVolumeIsReadOnly(t *testing.T) {
	t.Parallel()
	n := node(t)
	ns := namespace(t, n)
	putObject(t, n, ns+"/token", "tok-"+randomHex(8))
	localClass(t, n, ns, "ro", `
- objectName: `+ns+`/token
  objectAlias: token
`)
	pod := createPod(t, n, ns, "writer", "ro", "write", mountPath+"/planted")
	n.WaitPod(t, ns, "writer", "Running", nodeenv.Running)
	line := n.WaitLog(t, pod, "probe", "the write's outcome", func(l string) bool { return strings.HasPrefix(l, "write ") })
	if want := `write ` + mountPath + `/planted error="read-only file system"`; line != want {
		t.Errorf("the container's write: %q, want %q", line, want)
	}
}
