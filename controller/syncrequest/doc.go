// Package syncrequest builds the provider MountRequest keymount-controller
// sends for a SecretSync, the request secrets-store-sync-controller v0.0.5
// sends, so that providers written for it (and for the CSI driver) work
// unchanged.
//
// What v0.0.5 sends (its internal/controller prepareCSIProviderParams and
// pkg/provider MountContent), and so what Build sends:
//
//   - attributes: the SecretProviderClass's spec.parameters, then
//     csi.storage.k8s.io/pod.name and csi.storage.k8s.io/pod.uid naming the
//     controller's own pod (from the downward-API environment variables
//     SYNC_CONTROLLER_POD_NAME and SYNC_CONTROLLER_POD_UID; "" when unset),
//     csi.storage.k8s.io/pod.namespace = the SecretSync's namespace (not the
//     controller's: a provider that looks the pod up there will not find
//     it), csi.storage.k8s.io/serviceAccount.name = the SecretSync's
//     spec.serviceAccountName, and csi.storage.k8s.io/serviceAccount.tokens
//     (see controller/tokens) only when audiences are configured. No
//     secretProviderClass and no csi.storage.k8s.io/ephemeral key.
//   - secrets: "{}" (there is no nodePublishSecretRef).
//   - permission: "420", the JSON of file mode 0644.
//   - target_path: "/mnt/secrets-store", a path that exists nowhere: files
//     come back in the response.
//   - current_object_version: v0.0.5 sends none; keymount sends the versions
//     of the last successful sync, so providers can skip unchanged objects
//     (the driver does the same).
//
// One deliberate difference: class parameters whose key starts with
// "csi.storage.k8s.io/" (kubelet's keys) are dropped before the controller's
// own are set. v0.0.5 keeps them, which lets a class author hand a provider
// a forged serviceAccount.tokens when no audience is configured.
package syncrequest
