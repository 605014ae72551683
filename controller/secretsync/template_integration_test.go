//go:build integration

package secretsync_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsync "github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/poll"
)

// TestSecretSyncTemplate: against a real API server and the local
// provider, a keymount.io/template.<key> annotation on a SecretSync builds
// data[<key>] from several objects (also ones no spec data names); refresh
// rounds that change nothing write nothing; a changed template text is
// synced at once; a template that fails to render reports TemplateError
// (condition and Warning event naming the annotation, line and key) and
// keeps the Secret as it was.
func TestSecretSyncTemplate(t *testing.T) {
	f := startFixture(t, secretsync.Config{})
	ns := f.app(t, "templates", "db-user", "db-password", "db-host")
	f.put(t, "db-user", "admin")
	f.put(t, "db-password", "pw-7731")
	f.put(t, "db-host", "db.internal")
	ss := secretSync(ns, "dsn", "db-user", "user")
	ss.Annotations = map[string]string{
		rotation.IntervalAnnotation: "1s",
		"keymount.io/template.dsn":  `postgresql://{{ index . "db-user" }}:{{ index . "db-password" }}@{{ index . "db-host" }}/app`,
	}
	if err := f.c.Create(t.Context(), ss); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "dsn"}
	f.waitReady(t, key)
	s := f.secret(t, key)
	if got := string(s.Data["dsn"]); got != "postgresql://admin:pw-7731@db.internal/app" {
		t.Errorf("data[dsn] = %q, want the rendered DSN", got)
	}
	if got := string(s.Data["user"]); got != "admin" {
		t.Errorf("data[user] = %q, want the spec's plain mapping", got)
	}

	t.Run("unchanged rounds write nothing", func(t *testing.T) {
		poll.Until(t, "SecretUpdated=True", func(ctx context.Context) (bool, error) {
			return conditionIs(f.get(t, key), ss1.ConditionSecretUpdated, metav1.ConditionTrue, ss1.ReasonSecretUpToDate), nil
		})
		ready := f.get(t, key)
		secretRV := f.secret(t, key).ResourceVersion
		start := f.calls.Load()
		poll.Until(t, "three more provider calls", func(ctx context.Context) (bool, error) {
			return f.calls.Load() >= start+3, nil
		})
		if rv := f.secret(t, key).ResourceVersion; rv != secretRV {
			t.Errorf("the Secret was written (resourceVersion %s → %s) by rounds that changed nothing", secretRV, rv)
		}
		if rv := f.get(t, key).ResourceVersion; rv != ready.ResourceVersion {
			t.Errorf("the SecretSync was written (resourceVersion %s → %s) by rounds that changed nothing", ready.ResourceVersion, rv)
		}
	})

	t.Run("a changed template text is synced", func(t *testing.T) {
		annotate(t, f, key, "keymount.io/template.dsn", `{{ index . "db-host" | upper }}`)
		poll.Until(t, "the new rendering", func(ctx context.Context) (bool, error) {
			return string(f.secret(t, key).Data["dsn"]) == "DB.INTERNAL", nil
		})
	})

	t.Run("a render error keeps the Secret", func(t *testing.T) {
		annotate(t, f, key, "keymount.io/template.dsn", "host={{ index . \"db-host\" }}\nport={{ .port }}")
		var got *ss1.SecretSync
		poll.Until(t, "SecretUpdated=False TemplateError", func(ctx context.Context) (bool, error) {
			got = f.get(t, key)
			return conditionIs(got, ss1.ConditionSecretUpdated, metav1.ConditionFalse, secretsync.ReasonTemplateError) &&
				conditionIs(got, ss1.ConditionReady, metav1.ConditionFalse, secretsync.ReasonTemplateError), nil
		})
		for _, c := range got.Status.Conditions {
			if c.Type == ss1.ConditionSecretUpdated {
				for _, want := range []string{"keymount.io/template.dsn", "line 2,", `"port"`} {
					if !strings.Contains(c.Message, want) {
						t.Errorf("condition message %q lacks %s", c.Message, want)
					}
				}
			}
		}
		poll.Until(t, "a Warning TemplateError event", func(ctx context.Context) (bool, error) {
			ev := findEvent(f.events(t, ns, "dsn"), secretsync.ReasonTemplateError)
			return ev != nil && ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, "keymount.io/template.dsn"), nil
		})
		if got := string(f.secret(t, key).Data["dsn"]); got != "DB.INTERNAL" {
			t.Errorf("data[dsn] = %q after a failed render, want the last good rendering kept", got)
		}
		assertNoValues(t, f.events(t, ns, "dsn"), "pw-7731", "db.internal")
	})
}
