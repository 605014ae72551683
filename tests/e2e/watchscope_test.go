package e2e

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

// This file's tests read the API server's audit log for everything a
// driver identity did. Tests run in file order and this file sorts last,
// so TestDriverRequestsAreNodeScoped sees the requests of every driver the
// package ran; it also runs a workload of its own, so it proves something
// when run alone.

// TestNoSyncDriverNeverTouchesSecrets runs a driver without --sync-secrets,
// bound only to the base ClusterRole (the deployment without the
// secret-sync component), through a whole volume life with a class that
// lists secretObjects: it needs no other permission and never sends a
// request about Secrets.
func TestNoSyncDriverNeverTouchesSecrets(t *testing.T) {
	n := startNode(t, nodeOptions{noSync: true})
	ns := n.newNamespace(t)
	content := []byte("unsynced-" + randomHex(8))
	n.writeObject(t, "token", content)
	spc := n.createClass(t, ns, "unsynced", "local", []object{{name: "token"}},
		&secretsstorev1.SecretObject{SecretName: "unsynced", Data: []*secretsstorev1.SecretObjectData{{ObjectName: "token", Key: "token"}}})
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "unsynced"})
	n.mustPublish(t, pod, "secrets")
	n.mustPublish(t, pod, "secrets")
	// The driver writes the pod status after it would have synced.
	n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"token": content}})
	if sec := n.s.secret(t, ns, "unsynced"); sec != nil {
		t.Errorf("a driver without --sync-secrets created Secret %s", sec.Name)
	}
	n.restartDriver(t)
	n.mustUnpublish(t, pod, "secrets")
	// The driver's last request: the audit log below holds all of them.
	n.s.waitForStatusGone(t, pod, "unsynced", "the unpublish")

	requests := requestsOf(n.s.env.AuditEvents(t), noSyncUser)
	if len(requests) == 0 {
		t.Fatalf("the audit log has no request of %s", noSyncUser)
	}
	for _, e := range requests {
		if e.ObjectRef != nil && e.ObjectRef.Resource == "secrets" {
			t.Errorf("a driver without --sync-secrets sent a request about Secrets: %s", describe(e))
		}
		if e.ResponseStatus != nil && e.ResponseStatus.Code == 403 {
			t.Errorf("the base ClusterRole keymount does not allow: %s", describe(e))
		}
	}
}

// TestDriverRequestsAreNodeScoped checks every list and watch request the
// syncing drivers sent: pods by spec.nodeName, pod statuses by the node
// label, Secrets by the managed label, SecretProviderClasses (few and
// small) cluster-wide, nothing else. No request may have been forbidden:
// the shipped RBAC is enough.
func TestDriverRequestsAreNodeScoped(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	content := []byte("scoped-" + randomHex(8))
	n.writeObject(t, "token", content)
	n.createClass(t, ns, "scoped", "local", []object{{name: "token"}},
		&secretsstorev1.SecretObject{SecretName: "scoped", Data: []*secretsstorev1.SecretObjectData{{ObjectName: "token", Key: "token"}}})
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "scoped"})
	n.mustPublish(t, pod, "secrets")
	n.s.waitForSecret(t, ns, "scoped", syncedMeta("scoped", pod), hasData(map[string][]byte{"token": content}))
	n.s.waitForStatus(t, pod, "scoped")
	n.mustUnpublish(t, pod, "secrets")
	// The driver's last request: the audit log below holds all of them.
	n.s.waitForStatusGone(t, pod, "scoped", "the unpublish")

	nodes := allNodes.nodeNames()
	selectors := map[string]func(q url.Values) bool{
		"pods": func(q url.Values) bool {
			node, ok := strings.CutPrefix(q.Get("fieldSelector"), "spec.nodeName=")
			return ok && slices.Contains(nodes, node)
		},
		"secretproviderclasspodstatuses": func(q url.Values) bool {
			node, ok := strings.CutPrefix(q.Get("labelSelector"), secretsstorev1.InternalNodeLabel+"=")
			return ok && slices.Contains(nodes, node)
		},
		"secrets": func(q url.Values) bool {
			return q.Get("labelSelector") == managedLabel+"=true"
		},
		"secretproviderclasses": func(url.Values) bool { return true },
	}
	seen := map[string]bool{}
	requests := requestsOf(n.s.env.AuditEvents(t), driverUser)
	for _, e := range requests {
		if e.ResponseStatus != nil && e.ResponseStatus.Code == 403 {
			t.Errorf("the shipped RBAC does not allow: %s", describe(e))
		}
		if !strings.HasPrefix(e.UserAgent, "keymount-driver/"+binaryVersion) {
			t.Errorf("a request of %s with user agent %q: %s", driverUser, e.UserAgent, describe(e))
		}
		if e.Verb != "list" && e.Verb != "watch" {
			continue
		}
		resource := ""
		if e.ObjectRef != nil {
			resource = e.ObjectRef.Resource
		}
		scoped, ok := selectors[resource]
		if !ok {
			t.Errorf("the driver lists or watches %q: %s", resource, describe(e))
			continue
		}
		u, err := url.Parse(e.RequestURI)
		if err != nil {
			t.Errorf("audit event with request URI %q: %v", e.RequestURI, err)
			continue
		}
		if !scoped(u.Query()) {
			t.Errorf("a %s of %s that is not node-scoped: %s", e.Verb, resource, describe(e))
		}
		seen[e.Verb+" "+resource] = true
	}
	for resource := range selectors {
		for _, verb := range []string{"list", "watch"} {
			if !seen[verb+" "+resource] {
				t.Errorf("no %s of %s in the audit log: the check above proved nothing about it", verb, resource)
			}
		}
	}
	t.Logf("checked %d requests of %s from %d drivers", len(requests), driverUser, len(nodes))
}
