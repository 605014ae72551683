package v1alpha1_test

import (
	"testing"

	secretsyncv1alpha1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// TestSyncControllerStrings: the condition types, reasons and messages
// keep the sync controller v0.0.5's exact strings (tools and runbooks
// written for it match on them).
func TestSyncControllerStrings(t *testing.T) {
	for got, want := range map[string]string{
		secretsyncv1alpha1.ConditionSecretCreated:                 "SecretCreated",
		secretsyncv1alpha1.ConditionSecretUpdated:                 "SecretUpdated",
		secretsyncv1alpha1.ReasonSyncStarting:                     "SyncStarting",
		secretsyncv1alpha1.ReasonNoUpdatesAttemptedYet:            "NoUpdatesAttemptedYet",
		secretsyncv1alpha1.ReasonCreateSuccessful:                 "CreateSuccessful",
		secretsyncv1alpha1.ReasonSecretUpToDate:                   "SecretUpToDate",
		secretsyncv1alpha1.ReasonProviderError:                    "ProviderError",
		secretsyncv1alpha1.ReasonInvalidClusterSecretLabel:        "InvalidClusterSecretLabelError",
		secretsyncv1alpha1.ReasonInvalidClusterSecretAnnotation:   "InvalidClusterSecretAnnotationError",
		secretsyncv1alpha1.ReasonControllerSyncError:              "ControllerSyncError",
		secretsyncv1alpha1.ReasonControllerPatchError:             "ControllerPatchError",
		secretsyncv1alpha1.ReasonSecretProviderClassMisconfigured: "SecretProviderClassMisconfigured",
		secretsyncv1alpha1.ReasonRemoteSecretStoreFetchFailed:     "RemoteSecretStoreFetchFailed",
		secretsyncv1alpha1.MessageCreateSuccessful:                "Secret created successfully.",
		secretsyncv1alpha1.MessageSecretUpToDate:                  "Secret contains last observed values.",
		secretsyncv1alpha1.LabelSecretSync:                        "secrets-store.sync.x-k8s.io",
		secretsyncv1alpha1.GroupName:                              "secret-sync.x-k8s.io",
	} {
		if got != want {
			t.Errorf("%q, want the sync controller's %q", got, want)
		}
	}
}
