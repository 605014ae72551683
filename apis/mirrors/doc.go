// Package mirrors holds the mirrors.kts.studio API versions: the
// SecretMirror of ktsstudio/mirrors, served by keymount-controller with its
// users' manifests unchanged.
package mirrors
