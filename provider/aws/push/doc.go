// Package push writes Kubernetes Secrets' values into Secrets Manager
// secrets and SSM parameters for the AWS provider's push extension
// (keymount.provider.v1.SecretPusher), with the credentials of the
// PushSecret's identity, and removes them.
//
// Items are grouped by remote object (object type and remote key): one
// write per object, every item of an object shares its outcome. A value
// keymount did not write is never replaced unless the item's policy is
// OVERWRITE, or REPLACE over an object another pusher marked as its own
// (the tag keymount.io/pushed-by naming the same owner, or the External
// Secrets Operator's managed-by=external-secrets) when keymount has
// written none.
//
// # Conditional writes
//
// Secrets Manager: a new value is put as a new version that carries only
// keymount's staging label (StagingLabel), then AWSCURRENT is moved to it
// from the version checked (UpdateSecretVersionStage with
// RemoveFromVersionId), which AWS refuses when another writer moved
// AWSCURRENT meanwhile: a conflict, the other writer's value stays current.
// DeleteSecret has no condition: a removal checks the version, then
// deletes (with the default recovery window), a window of one round trip.
//
// SSM Parameter Store has no conditional write: PutParameter (Overwrite)
// and DeleteParameter are sent right after the version check, and a write
// by someone else between the two is lost.
package push
