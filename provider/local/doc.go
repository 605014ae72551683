// Package local is a provider that mounts files from a directory on the node.
//
// It is keymount's embedded default for demos and tests: a
// SecretProviderClass names files under the provider's root directory and
// the provider returns their contents, so no external store is needed.
//
//	apiVersion: secrets-store.csi.x-k8s.io/v1
//	kind: SecretProviderClass
//	spec:
//	  provider: local
//	  parameters:
//	    objects: |
//	      - objectName: "db/password"
//	        objectAlias: "password"
//	      - objectName: "tls.crt"
//	        filePermission: "0600"
//
// objectName is a relative path under the root (required); objectAlias is
// the file's path in the volume (defaults to objectName); filePermission is
// an octal string (defaults to the volume's file permission, 0644). Any other
// class parameter (beside the keys the driver adds) or object field is
// refused, unless the class lists it in keymount.io/ignore-parameters.
//
// Every object is opened with openat2(RESOLVE_BENEATH): symlinks are
// followed only while they stay inside the root, so an object can never name
// a file outside it, not even through a symlink planted under the root.
// The version of an object is a hash of its contents.
package local
