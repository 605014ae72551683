// Package template renders keymount's value templates: Go text/template over
// the files a provider returned, with a fixed, safe function set in the spirit
// of External Secrets' template engine v2.
//
// A template sees one value as dot: a map from object name (the provider's file
// name: a SecretSync's sourcePath, a volume's objectAlias) to the object's
// content as a string, so {{ .username }} and {{ index . "db-password" }} both
// work. A missing key is an error naming the template, line and key.
//
// # Safety
//
// The function set is an allowlist (Functions): sprig's string, regex,
// encoding, list, dict and math functions, JSON and YAML, and External
// Secrets' PEM, PKCS#12 and JWK helpers. Nothing reads files, the environment,
// the network, the clock or a random source, so a template renders the same
// bytes from the same objects (a synced Secret is not rewritten when nothing
// changed).
//
// Every render is bounded: the template text (MaxTemplateBytes), the output
// (MaxOutputBytes), the items a range may walk (MaxRangeItems), the template
// calls ({{template}}, MaxTemplateCalls) and the time (Timeout, checked at
// every function call, range and template call). A panic inside a function is
// turned into an error; none escapes Render.
//
// # Configuration
//
// Templates are configured by annotations whose key starts with
// AnnotationPrefix ("keymount.io/template."); the rest of the key names the
// Secret data key (on a SecretSync) or the file (on a SecretProviderClass,
// for volumes) the output is written to. FromAnnotations extracts and checks
// them. The package imports nothing of keymount: the driver and the cluster
// controller both use it.
package template
