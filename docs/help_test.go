package docs_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// This file holds the docs to the binaries' behaviour, not only to their
// source: it builds every binary of cmd/, runs each one's --help (and every
// keymount subcommand's), converts a manifest of every provider and kind
// the docs say keymount convert reads, and checks every "has no equivalent"
// or "not supported" line of the docs against what exists.

// binaries are the commands of cmd/, built once by TestHelpAndDocsAgree.
type binaries struct {
	dir  string
	help map[string]string // binary, or "keymount <command>" → its --help
}

func (b *binaries) path(name string) string { return filepath.Join(b.dir, name) }

// run runs a binary and returns its stdout, its stderr and its exit code.
func (b *binaries) run(t *testing.T, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), b.path(name), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("%s %q: %v", name, args, err)
	}
	return out.String(), errOut.String(), code
}

// buildBinaries builds every main package of cmd/ into one directory.
func buildBinaries(t *testing.T) *binaries {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test builds the binaries and needs the go command: %v", err)
	}
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), goBin, "build", "-o", dir+string(filepath.Separator), "./cmd/...")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/...: %v\n%s", err, out)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := &binaries{dir: dir, help: map[string]string{}}
	for _, e := range entries {
		b.help[e.Name()] = ""
	}
	if len(b.help) < 6 {
		t.Fatalf("go build ./cmd/... made %d binaries, want every binary of cmd/ (at least 6)", len(b.help))
	}
	return b
}

// TestHelpAndDocsAgree: every binary's --help runs, every keymount
// subcommand's too; keymount convert converts every provider and kind the
// docs say it reads, and nothing the code accepts is missing from the docs;
// every "has no equivalent" or "not supported" line of the docs names no
// feature that exists; every flag default the docs' tables state is the
// binary's.
func TestHelpAndDocsAgree(t *testing.T) {
	b := buildBinaries(t)
	t.Run("EveryHelpRuns", func(t *testing.T) { testEveryHelpRuns(t, b) })
	if t.Failed() {
		return
	}
	t.Run("ProvidersTheDocsNameAreServed", func(t *testing.T) { testProvidersServed(t, b) })
	t.Run("APIsTheDocsNameAreServed", testAPIsServed)
	t.Run("ConvertReadsWhatTheDocsSay", func(t *testing.T) { testConvertReadsWhatTheDocsSay(t, b) })
	t.Run("ConvertDocsNameAllItReads", func(t *testing.T) { testConvertDocsNameAllItReads(t, b) })
	t.Run("NoEquivalentNamesNoFeature", func(t *testing.T) { testNoEquivalentNamesNoFeature(t, b) })
	t.Run("FlagDefaultsInDocsMatchHelp", func(t *testing.T) { testFlagDefaults(t, b) })
}

// keymountCommands returns the commands "keymount --help" lists.
func keymountCommands(t *testing.T, help string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(help, "Commands:\n")
	if !ok {
		t.Fatalf("keymount --help has no Commands: section:\n%s", help)
	}
	var cmds []string
	for line := range strings.SplitSeq(rest, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			break
		}
		cmds = append(cmds, f[0])
	}
	return cmds
}

func testEveryHelpRuns(t *testing.T, b *binaries) {
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range b.help {
			if !yield(k) {
				return
			}
		}
	}) {
		stdout, stderr, code := b.run(t, name, "--help")
		if code != 0 {
			t.Errorf("%s --help exited %d:\n%s%s", name, code, stdout, stderr)
		}
		b.help[name] = stdout + stderr
		if name != "keymount" && !strings.Contains(b.help[name], "-v") {
			t.Errorf("%s --help lists no flags:\n%s", name, b.help[name])
		}
	}
	cmds := keymountCommands(t, b.help["keymount"])
	for _, want := range []string{"mount", "unmount", "convert", "version", "help"} {
		if !slices.Contains(cmds, want) {
			t.Errorf("keymount --help lists the commands %q, without %q", cmds, want)
		}
	}
	for _, c := range cmds {
		switch c {
		case "help":
			continue
		case "version":
			stdout, _, code := b.run(t, "keymount", "version")
			if code != 0 || !strings.HasPrefix(stdout, "keymount ") {
				t.Errorf("keymount version: exit %d, %q", code, stdout)
			}
			continue
		}
		stdout, stderr, code := b.run(t, "keymount", c, "--help")
		help := stdout + stderr
		if code != 0 || !strings.HasPrefix(help, "Usage: keymount "+c) {
			t.Errorf("keymount %s --help: exit %d, want 0 and its usage:\n%s", c, code, help)
		}
		b.help["keymount "+c] = help
		viaHelp, _, code := b.run(t, "keymount", "help", c)
		if code != 0 || viaHelp != help {
			t.Errorf("keymount help %s (exit %d) differs from keymount %s --help:\n%s\n---\n%s", c, code, c, viaHelp, help)
		}
	}
}

// codeSpan is an inline code span of Markdown.
var codeSpan = regexp.MustCompile("`([^`]+)`")

func spans(s string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// tableCells splits a Markdown table row into its cells.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(strings.TrimSuffix(line, "|"), "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// convertRead is one row of the ESO guide's table of what keymount convert
// reads.
type convertRead struct {
	line       int
	apiVersion string
	kinds      []string // ExternalSecret, and the stores it may name
	providers  []string // store providers, or KES backends
	of         []string // services, KV versions, logins
}

// convertReads parses the table of what keymount convert reads: the one
// whose header names "store provider or backend".
func convertReads(t *testing.T) []convertRead {
	t.Helper()
	const file = "migrating-from-external-secrets.md"
	var rows []convertRead
	in := false
	for n, line := range strings.Split(readDoc(t, file), "\n") {
		switch {
		case strings.HasPrefix(line, "|") && strings.Contains(line, "store provider or backend"):
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "|"):
			c := tableCells(line)
			if len(c) != 5 {
				t.Fatalf("%s:%d: a row of what keymount convert reads has %d cells, want 5", file, n+1, len(c))
			}
			api := spans(c[1])
			if len(api) != 1 {
				t.Fatalf("%s:%d: want one apiVersion, got %q", file, n+1, api)
			}
			rows = append(rows, convertRead{line: n + 1, apiVersion: api[0], kinds: spans(c[2]), providers: spans(c[3]), of: spans(c[4])})
		case in:
			in = false
		}
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no table of what keymount convert reads (a header with \"store provider or backend\")", file)
	}
	return rows
}

// Versions of the input convert reads.
const (
	esoAPI = "external-secrets.io/v1"
	// esoBetaAPI is read as esoAPI: the same schema.
	esoBetaAPI = "external-secrets.io/v1beta1"
	kesAPI     = "kubernetes-client.io/v1"
)

// esoStore is a SecretStore or ClusterSecretStore named "store" of the
// namespace "team-a" with the provider section given.
func esoStore(kind, provider string) string {
	ns := "\n  namespace: team-a"
	if kind == "ClusterSecretStore" {
		ns = ""
	}
	return fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata:\n  name: store%s\nspec:\n  provider:\n%s\n", esoAPI, kind, ns, indent(provider, 4))
}

// awsProvider is an aws store section of the service given.
func awsProvider(service string) string {
	return "aws:\n  service: " + service + "\n  region: eu-west-1\n  auth:\n    jwt:\n      serviceAccountRef:\n        name: web"
}

// vaultProvider is a vault store section of the KV version and extra
// fields given, logging in with Kubernetes auth.
func vaultProvider(version, extra string) string {
	s := "vault:\n  server: https://vault.example.com:8200\n  path: secret\n  version: " + version +
		"\n  auth:\n    kubernetes:\n      role: web\n      serviceAccountRef:\n        name: web"
	if extra != "" {
		s += "\n" + indent(extra, 2)
	}
	return s
}

// esoExternalSecret is an ExternalSecret of team-a reading the store, with
// the spec given (its data by default).
func esoExternalSecret(storeKind, spec string) string {
	if spec == "" {
		spec = "data:\n  - secretKey: password\n    remoteRef:\n      key: team-a/db\n      property: password"
	}
	return fmt.Sprintf("apiVersion: %s\nkind: ExternalSecret\nmetadata:\n  name: app\n  namespace: team-a\nspec:\n  secretStoreRef:\n    name: store\n    kind: %s\n%s\n",
		esoAPI, storeKind, indent(spec, 2))
}

// kesExternalSecret is a KES ExternalSecret of the backend and extra spec
// fields given.
func kesExternalSecret(backend, extra string) string {
	s := fmt.Sprintf("apiVersion: %s\nkind: ExternalSecret\nmetadata:\n  name: app\n  namespace: team-a\nspec:\n  backendType: %s\n  region: eu-west-1\n  data:\n    - key: team-a/db\n      name: password\n",
		kesAPI, backend)
	if extra != "" {
		s += indent(extra, 2) + "\n"
	}
	return s
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

func docs(parts ...string) string { return strings.Join(parts, "---\n") }

// converted is the outcome of one keymount convert run.
type converted struct {
	stdout, stderr string
	code           int
}

// ok reports a conversion that succeeded and wrote a SecretSync.
func (c converted) ok() bool { return c.code == 0 && strings.Contains(c.stdout, "kind: SecretSync") }

// refuses reports whether convert refused the field path (a "not
// supported" line for exactly that path).
func (c converted) refuses(path string) bool {
	return strings.Contains(c.stderr, ": "+path+": not supported")
}

func convert(t *testing.T, b *binaries, manifest string, args ...string) converted {
	t.Helper()
	f := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := b.run(t, "keymount", append([]string{"convert", "-f", f}, args...)...)
	return converted{stdout: stdout, stderr: stderr, code: code}
}

// convertCase is one input the docs say convert reads.
type convertCase struct {
	name, manifest, provider string
	args                     []string
}

// casesOf builds an input for every kind, provider and service, version
// or login of a row; one it cannot build fails the test.
func casesOf(t *testing.T, r convertRead) []convertCase {
	t.Helper()
	var out []convertCase
	switch r.apiVersion {
	case kesAPI:
		if !slices.Equal(r.kinds, []string{"ExternalSecret"}) {
			t.Errorf("row %d: KES kinds %q: the test knows ExternalSecret only", r.line, r.kinds)
		}
		for _, backend := range r.providers {
			// KES names no identity: the docs say to pass one.
			out = append(out, convertCase{name: "KES " + backend, manifest: kesExternalSecret(backend, ""), provider: "aws",
				args: []string{"--service-account", "web"}})
		}
	case esoAPI, esoBetaAPI:
		if !slices.Contains(r.kinds, "ExternalSecret") {
			t.Errorf("row %d: ESO kinds %q without ExternalSecret", r.line, r.kinds)
		}
		for _, kind := range r.kinds {
			if kind == "ExternalSecret" {
				continue
			}
			for _, p := range r.providers {
				for _, section := range esoSections(t, r, p) {
					manifest := docs(esoStore(kind, section.yaml), esoExternalSecret(kind, ""))
					if kind == "ClusterExternalSecret" {
						manifest = docs(esoStore("ClusterSecretStore", section.yaml), clusterExternalSecret())
					}
					manifest = strings.ReplaceAll(manifest, "apiVersion: "+esoAPI+"\n", "apiVersion: "+r.apiVersion+"\n")
					out = append(out, convertCase{name: fmt.Sprintf("ESO %s %s %s %s", r.apiVersion, kind, p, section.name),
						manifest: manifest, provider: p})
				}
			}
		}
	default:
		t.Errorf("row %d: apiVersion %q: the test knows %s, %s and %s", r.line, r.apiVersion, esoAPI, esoBetaAPI, kesAPI)
	}
	return out
}

type storeSection struct{ name, yaml string }

// esoSections are the store sections of one provider of a row, one per
// service, KV version or login the row names.
func esoSections(t *testing.T, r convertRead, provider string) []storeSection {
	t.Helper()
	var out []storeSection
	for _, of := range r.of {
		switch {
		case provider == "aws":
			out = append(out, storeSection{of, awsProvider(of)})
		case provider == "vault" && regexp.MustCompile(`^v\d+$`).MatchString(of):
			out = append(out, storeSection{of, vaultProvider(of, "")})
		case provider == "vault" && of == "auth.kubernetes":
			out = append(out, storeSection{of, vaultProvider("v2", "")})
		default:
			t.Errorf("row %d: %q of provider %q: the test cannot build such a store; teach it", r.line, of, provider)
		}
	}
	if len(out) == 0 {
		t.Errorf("row %d: provider %q names no service, version or login", r.line, provider)
	}
	return out
}

func testConvertReadsWhatTheDocsSay(t *testing.T, b *binaries) {
	served := servedProviders(t, b)
	for _, r := range convertReads(t) {
		for _, c := range casesOf(t, r) {
			got := convert(t, b, c.manifest, c.args...)
			if !got.ok() {
				t.Errorf("migrating-from-external-secrets.md:%d says keymount convert reads %s, but it refused it (exit %d):\n%s\ninput:\n%s",
					r.line, c.name, got.code, got.stderr, c.manifest)
				continue
			}
			if !strings.Contains(got.stdout, "provider: "+c.provider+"\n") {
				t.Errorf("%s: the class is not of provider %s:\n%s", c.name, c.provider, got.stdout)
			}
			if _, ok := served[c.provider]; !ok {
				t.Errorf("%s: keymount convert writes classes of provider %s, which no keymount provider serves (%v)", c.name, c.provider, served)
			}
		}
	}
}

// providerName is the default of a provider binary's --name in its --help.
var providerName = regexp.MustCompile(`(?m)^\s+-name string\n.*\(default "([^"]+)"\)`)

// servedProviders maps the provider name each keymount-provider-* binary
// serves (its --name default) to the binary.
func servedProviders(t *testing.T, b *binaries) map[string]string {
	t.Helper()
	out := map[string]string{}
	for bin, help := range b.help {
		if !strings.HasPrefix(bin, "keymount-provider-") {
			continue
		}
		m := providerName.FindStringSubmatch(help)
		if m == nil {
			t.Fatalf("%s --help names no --name default (the provider name it serves):\n%s", bin, help)
		}
		out[m[1]] = bin
	}
	if len(out) == 0 {
		t.Fatal("no keymount-provider-* binary was built")
	}
	return out
}

// numbers are the counts the docs write as words.
var numbers = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}

// shipsSentence is the quick start's "It ships three: `local` (...), ...".
var shipsSentence = regexp.MustCompile(`It ships (\w+): ([^.]*)`)

// testProvidersServed: the providers the quick start says keymount ships
// and those of compatibility.md's providers table are the ones its
// provider binaries serve.
func testProvidersServed(t *testing.T, b *binaries) {
	served := servedProviders(t, b)
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range served {
			if !yield(k) {
				return
			}
		}
	})
	text := strings.Join(strings.Fields(readDoc(t, "quick-start.md")), " ")
	m := shipsSentence.FindStringSubmatch(text)
	if m == nil {
		t.Fatal("quick-start.md has no \"It ships N: ...\" sentence naming the providers")
	}
	claimed := []string{}
	for _, s := range spans(m[2]) {
		if !strings.Contains(s, " ") && !strings.Contains(s, "/") {
			claimed = append(claimed, s)
		}
	}
	slices.Sort(claimed)
	if numbers[m[1]] != len(names) || !slices.Equal(claimed, names) {
		t.Errorf("quick-start.md says keymount ships %s providers %q; its provider binaries serve %q", m[1], claimed, names)
	}
	// compatibility.md: a row "| `name` (`keymount-provider-name`) | ..." per provider.
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\(`(keymount-provider-[a-z0-9-]+)`\\) \\|")
	rows := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(readDoc(t, "compatibility.md"), -1) {
		rows[m[1]] = m[2]
	}
	if !maps.Equal(rows, served) {
		t.Errorf("compatibility.md's providers table names %v; the provider binaries serve %v", rows, served)
	}
}

// crds returns the CRDs keymount installs.
func crds(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob("../deploy/crds/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in deploy/crds: %v", err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, crd)
	}
	return out
}

// apiGroupKinds is README's "apis/" row: "`group` (Kind, Kind)".
var apiGroupKinds = regexp.MustCompile("`([a-z0-9.-]+)` \\(([A-Za-z, ]+)\\)")

// testAPIsServed: the API groups and kinds README's "apis/" row names are
// the CRDs of deploy/crds, and the versions copying-secrets.md says
// SecretMirror serves and stores are the CRD's.
func testAPIsServed(t *testing.T) {
	have := map[string][]string{}
	var mirror *apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds(t) {
		have[crd.Spec.Group] = append(have[crd.Spec.Group], crd.Spec.Names.Kind)
		if crd.Spec.Names.Kind == "SecretMirror" {
			mirror = crd
		}
	}
	row := ""
	for line := range strings.SplitSeq(readDoc(t, "../README.md"), "\n") {
		if strings.HasPrefix(line, "| `apis/` |") {
			row = line
		}
	}
	claimed := map[string][]string{}
	for _, m := range apiGroupKinds.FindAllStringSubmatch(row, -1) {
		for k := range strings.SplitSeq(m[2], ",") {
			claimed[m[1]] = append(claimed[m[1]], strings.TrimSpace(k))
		}
	}
	for g := range have {
		slices.Sort(have[g])
		slices.Sort(claimed[g])
	}
	if !maps.EqualFunc(have, claimed, slices.Equal) {
		t.Errorf("README's apis/ row names %v; deploy/crds serves %v", claimed, have)
	}
	if mirror == nil {
		t.Fatal("deploy/crds has no SecretMirror CRD")
	}
	// copying-secrets.md: "`v1alpha2` (stored) and `v1alpha1` (served)".
	m := regexp.MustCompile("`(v\\w+)` \\(stored\\) and `(v\\w+)` \\(served\\)").FindStringSubmatch(readDoc(t, "copying-secrets.md"))
	if m == nil {
		t.Fatal("copying-secrets.md does not say which SecretMirror versions are stored and served")
	}
	for _, v := range mirror.Spec.Versions {
		if want := v.Name == m[1]; v.Storage != want || !v.Served || (v.Name != m[1] && v.Name != m[2]) {
			t.Errorf("SecretMirror CRD version %s: served %v, stored %v; copying-secrets.md says %s stored and %s served", v.Name, v.Served, v.Storage, m[1], m[2])
		}
	}
	if len(mirror.Spec.Versions) != 2 {
		t.Errorf("the SecretMirror CRD has %d versions; copying-secrets.md names two", len(mirror.Spec.Versions))
	}
}

// Candidates convert might read: External Secrets Operator's providers
// and Vault logins, Kubernetes External Secrets' backends, External
// Secrets' other kinds. Whichever it accepts must be in the docs' table.
var (
	esoProviders = []string{"aws", "vault", "gcpsm", "azurekv", "kubernetes", "akeyless", "ibm", "yandexlockbox",
		"yandexcertificatemanager", "gitlab", "oracle", "alibaba", "onepassword", "webhook", "fake", "senhasegura",
		"doppler", "keepersecurity", "scaleway", "conjur", "delinea", "secretserver", "chef", "pulumi",
		"bitwardensecretsmanager", "infisical", "passbolt", "device42", "beyondtrust", "fortanix", "passworddepot",
		"previder", "cloudrusm", "github", "onboardbase", "ngrok"}
	vaultLogins = []string{"kubernetes", "tokenSecretRef", "appRole", "ldap", "jwt", "cert", "iam", "userPass", "gcp"}
	kesBackends = []string{"secretsManager", "systemManager", "vault", "azureKeyVault", "gcpSecretsManager",
		"alicloudSecretsManager", "ibmcloudSecretsManager", "akeyless"}
	esoKinds = []string{"ClusterExternalSecret", "PushSecret", "ClusterPushSecret"}
)

// testConvertDocsNameAllItReads: what convert accepts is in the table, and
// every description of convert (its --help, README) names every row.
func testConvertDocsNameAllItReads(t *testing.T, b *binaries) {
	rows := convertReads(t)
	claimed := map[string]bool{}
	for _, r := range rows {
		for _, p := range r.providers {
			claimed[r.apiVersion+" "+p] = true
			for _, of := range r.of {
				claimed[r.apiVersion+" "+p+" "+of] = true
			}
		}
		for _, k := range r.kinds {
			claimed[r.apiVersion+" "+k] = true
		}
	}
	checkAcceptedAreClaimed(t, b, claimed)
	checkDescriptionsNameRows(t, b, rows)
}

// checkAcceptedAreClaimed: every candidate convert accepts is claimed.
func checkAcceptedAreClaimed(t *testing.T, b *binaries, claimed map[string]bool) {
	for _, p := range esoProviders {
		c := convert(t, b, docs(esoStore("SecretStore", p+": {}"), esoExternalSecret("SecretStore", "")))
		if !c.refuses("spec.provider."+p) && !claimed[esoAPI+" "+p] {
			t.Errorf("keymount convert accepts ESO stores of provider %q, which the table of migrating-from-external-secrets.md does not list:\n%s", p, c.stderr)
		}
	}
	for _, login := range vaultLogins {
		c := convert(t, b, docs(esoStore("SecretStore", vaultProvider("v2", "auth:\n  "+login+": {}")), esoExternalSecret("SecretStore", "")))
		if login != "kubernetes" && !c.refuses("spec.provider.vault.auth."+login) && !claimed[esoAPI+" vault auth."+login] {
			t.Errorf("keymount convert accepts Vault stores with auth.%s, which the table of migrating-from-external-secrets.md does not list:\n%s", login, c.stderr)
		}
	}
	for _, backend := range kesBackends {
		c := convert(t, b, kesExternalSecret(backend, ""))
		if !c.refuses("spec.backendType") && !claimed[kesAPI+" "+backend] {
			t.Errorf("keymount convert accepts KES backend %q, which the table of migrating-from-external-secrets.md does not list:\n%s", backend, c.stderr)
		}
	}
	for _, kind := range esoKinds {
		c := convert(t, b, docs(esoStore("SecretStore", awsProvider("SecretsManager")), otherKind(kind)))
		if c.ok() && !claimed[esoAPI+" "+kind] {
			t.Errorf("keymount convert converts %s, which the table of migrating-from-external-secrets.md does not list", kind)
		}
	}
}

// checkDescriptionsNameRows: every description of convert names every
// provider, backend, kind, service, version and login of the table.
func checkDescriptionsNameRows(t *testing.T, b *binaries, rows []convertRead) {
	descriptions := map[string]string{
		"keymount convert --help":                       b.help["keymount convert"],
		"README.md, Convert External Secrets manifests": mdSection(t, "../README.md", readDoc(t, "../README.md"), "## Convert External Secrets manifests"),
	}
	for where, text := range descriptions {
		for _, r := range rows {
			for _, word := range slices.Concat([]string{r.apiVersion}, r.kinds, r.providers, r.of) {
				if !regexp.MustCompile(`(^|[^A-Za-z0-9.])` + regexp.QuoteMeta(word) + `s?($|[^A-Za-z0-9])`).MatchString(text) {
					t.Errorf("%s does not name %q, which keymount convert reads (migrating-from-external-secrets.md:%d)", where, word, r.line)
				}
			}
		}
	}
}

// clusterExternalSecret is a ClusterExternalSecret reading the
// ClusterSecretStore "store" into the namespaces labelled team=a.
func clusterExternalSecret() string {
	r := strings.NewReplacer("{key: team-a/db}", "{key: team-a/db, property: password}",
		"{name: store, kind: SecretStore}", "{name: store, kind: ClusterSecretStore}")
	return r.Replace(otherKind("ClusterExternalSecret"))
}

// otherKind is an External Secrets object of another kind, holding an
// ExternalSecret spec where its kind has one.
func otherKind(kind string) string {
	return fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata:\n  name: app\n  namespace: team-a\nspec:\n  namespaceSelector:\n    matchLabels: {team: a}\n  externalSecretSpec:\n    secretStoreRef: {name: store, kind: SecretStore}\n    data:\n      - secretKey: password\n        remoteRef: {key: team-a/db}\n",
		esoAPI, kind)
}

// noEquivalentPhrase marks a sentence that says something does not exist.
var noEquivalentPhrase = regexp.MustCompile(`(?i)\b(ha(s|ve) no equivalent|no equivalent object|not supported|not served|ha(s|ve) no conversion)\b`)

// docSentences returns the sentences of a Markdown file outside code
// blocks, with their line, each table row being one sentence.
func docSentences(t *testing.T, file string) []docSentence {
	t.Helper()
	var out []docSentence
	var para strings.Builder
	paraLine, heading, bullet := 0, "", false
	flush := func() {
		text := para.String()
		para.Reset()
		lead := ""
		if m := boldLead.FindStringSubmatch(text); bullet && m != nil {
			lead = m[1]
		}
		for s := range splitSentences(text) {
			out = append(out, docSentence{file: file, line: paraLine, text: s, heading: heading, bullet: bullet, lead: lead})
		}
		bullet = false
	}
	fenced := false
	sc := bufio.NewScanner(strings.NewReader(readDoc(t, file)))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			fenced = !fenced
			flush()
		case fenced:
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			flush()
			if strings.HasPrefix(trimmed, "#") {
				heading = strings.TrimLeft(trimmed, "# ")
			}
		case strings.HasPrefix(trimmed, "|"):
			flush()
			out = append(out, docSentence{file: file, line: n, text: trimmed})
		case strings.HasPrefix(trimmed, "- ") || strings.HasPrefix(trimmed, "* "):
			flush()
			paraLine, bullet = n, true
			para.WriteString(trimmed[2:])
		default:
			if para.Len() == 0 {
				paraLine = n
			} else {
				para.WriteByte(' ')
			}
			para.WriteString(trimmed)
		}
	}
	flush()
	return out
}

type docSentence struct {
	file, heading string
	line          int
	text          string
	// bullet: the sentence is of a list item, whose bold lead ("**A
	// controller identity.**") is lead.
	bullet bool
	lead   string
}

// boldLead is the bold start of a list item: "**Writing to the store.**".
var boldLead = regexp.MustCompile(`^\*\*([^*]+?)\.?\*\*`)

// splitSentences splits a paragraph after ". ", never inside a code span
// nor after "e.g." or "i.e.".
func splitSentences(p string) func(func(string) bool) {
	return func(yield func(string) bool) {
		start, inCode := 0, false
		for i := 0; i < len(p); i++ {
			switch {
			case p[i] == '`':
				inCode = !inCode
			case !inCode && p[i] == '.' && i+2 < len(p) && p[i+1] == ' ' && !strings.HasSuffix(p[:i], "e.g") && !strings.HasSuffix(p[:i], "i.e"):
				if !yield(p[start : i+1]) {
					return
				}
				start = i + 2
			}
		}
		if s := strings.TrimSpace(p[start:]); s != "" {
			yield(s)
		}
	}
}

// A feature check says whether a feature named in the docs exists.
type featureCheck struct {
	// exists reports whether the feature exists now.
	exists func(t *testing.T, f *features) bool
	// want is what the docs' line implies: false for what it says does
	// not exist, true for the keymount feature it offers instead.
	want bool
	// foreign names another project's field, which keymount neither has
	// nor claims to have: not checked.
	foreign string
}

// features holds what the checks look at.
type features struct {
	b *binaries
}

// refusedESO is a check that convert refuses the field path of an ESO
// input (store and ExternalSecret).
func refusedESO(store, spec, path string) featureCheck {
	return featureCheck{exists: func(t *testing.T, f *features) bool {
		c := convert(t, f.b, docs(store, esoExternalSecret("SecretStore", spec)))
		return !c.refuses(path)
	}}
}

// convertsESO checks that convert converts an ExternalSecret of the aws
// store with spec, writing want.
func convertsESO(spec, want string) featureCheck {
	return featureCheck{want: true, exists: func(t *testing.T, f *features) bool {
		c := convert(t, f.b, docs(awsStore, esoExternalSecret("SecretStore", spec)))
		return c.ok() && strings.Contains(c.stdout, want)
	}}
}

// awsSpec is an ESO ExternalSecret spec reading with the aws store, with
// the lines given added.
func awsSpec(extra string) string {
	return "data:\n  - secretKey: password\n    remoteRef:\n      key: team-a/db\n      property: password\n" + extra
}

var awsStore = esoStore("SecretStore", awsProvider("SecretsManager"))

func vaultStoreWith(extra string) string { return esoStore("SecretStore", vaultProvider("v2", extra)) }

// vaultLoginRefused checks that convert refuses a Vault store's login.
func vaultLoginRefused(login string) featureCheck {
	return refusedESO(vaultStoreWith("auth:\n  "+login+": {}"), "", "spec.provider.vault.auth."+login)
}

func vaultFieldRefused(field, value string) featureCheck {
	return refusedESO(vaultStoreWith(field+": "+value), "", "spec.provider.vault."+field)
}

// esoPushSecret is an external-secrets.io/v1alpha1 PushSecret of team-a
// pushing the Secret app's key password with the store "store"; spec, one
// top-level field of the spec, replaces the default's or is added.
func esoPushSecret(spec string) string {
	fields := []string{
		"secretStoreRefs: [{name: store, kind: SecretStore}]",
		"selector: {secret: {name: app}}",
		"data:\n  - match: {secretKey: password, remoteRef: {remoteKey: team-a/copy}}",
	}
	key, _, _ := strings.Cut(spec, ":")
	i := slices.IndexFunc(fields, func(f string) bool { return strings.HasPrefix(f, key+":") })
	if i < 0 {
		fields = append(fields, spec)
	} else {
		fields[i] = spec
	}
	return "apiVersion: external-secrets.io/v1alpha1\nkind: PushSecret\nmetadata:\n  name: app\n  namespace: team-a\nspec:\n" + indent(strings.Join(fields, "\n"), 2) + "\n"
}

// refusedPush checks that convert refuses path of a PushSecret of the aws
// store with spec.
func refusedPush(spec, path string) featureCheck {
	return featureCheck{exists: func(t *testing.T, f *features) bool {
		return !convert(t, f.b, docs(awsStore, esoPushSecret(spec))).refuses(path)
	}}
}

// crdKinds are the kinds of the CRDs keymount installs.
func crdKinds(t *testing.T) []string {
	t.Helper()
	var kinds []string
	for _, crd := range crds(t) {
		kinds = append(kinds, crd.Spec.Names.Kind)
	}
	return kinds
}

// sourceHas reports whether a non-test Go file under dir holds s.
func sourceHas(t *testing.T, dir, s string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(filepath.Join("..", dir), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = found || bytes.Contains(data, []byte(s))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func fileHas(t *testing.T, path, s string) bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(data, []byte(s))
}

// noEquivalent maps every code span of a docs line that says something
// does not exist ("has no equivalent", "not supported", "not served", "has
// no conversion") to a check. A new such line naming something new fails
// until its check is added here; a feature added to keymount fails the
// check of the line that says it does not exist.
var noEquivalent = map[string]featureCheck{
	// migrating-from-external-secrets.md, What has no equivalent.
	"templateFrom": refusedESO(awsStore, awsSpec("target:\n  template:\n    templateFrom:\n      - configMap: {name: t, items: [{key: k}]}"), "spec.target.template.templateFrom"),
	"template.data": {exists: func(t *testing.T, f *features) bool {
		return !convert(t, f.b, kesExternalSecret("secretsManager", "template:\n  data:\n    password: <%= data.password %>")).refuses("spec.template.data")
	}},
	"dataFrom.find":     refusedESO(vaultStoreWith(""), "data:\n  - secretKey: password\n    remoteRef: {key: team-a/db, property: password}\ndataFrom:\n  - find: {name: {regexp: db}}", "spec.dataFrom[0].find"),
	"extract.property":  refusedESO(awsStore, awsSpec("dataFrom:\n  - extract: {key: team-a/db, property: a}"), "spec.dataFrom[0].extract.property"),
	"rewrite.transform": refusedESO(awsStore, awsSpec("dataFrom:\n  - find: {name: {regexp: db}}\n    rewrite: [{transform: {template: x}}]"), "spec.dataFrom[0].rewrite[0].transform"),
	"rewrite.merge":     refusedESO(awsStore, awsSpec("dataFrom:\n  - find: {name: {regexp: db}}\n    rewrite: [{merge: {}}]"), "spec.dataFrom[0].rewrite[0].merge"),
	"regexp":            convertsESO(awsSpec("dataFrom:\n  - find: {name: {regexp: db}}\n    rewrite: [{regexp: {source: '^db', target: ''}}]"), "regexp:"),
	"extract":           convertsESO(awsSpec("dataFrom:\n  - extract: {key: team-a/db}"), "extract:"),
	"find":              convertsESO(awsSpec("dataFrom:\n  - find: {name: {regexp: db}}"), "find:"),
	"immutable":         refusedESO(awsStore, awsSpec("target:\n  immutable: true"), "spec.target.immutable"),
	"Immutable Secrets": refusedESO(awsStore, awsSpec("target:\n  immutable: true"), "spec.target.immutable"),
	// A ClusterExternalSecret reading each namespace's own SecretStore.
	"ClusterExternalSecret":                           perNamespaceStoreRefused,
	"externalSecretSpec":                              perNamespaceStoreRefused,
	"Per-namespace stores of a ClusterExternalSecret": perNamespaceStoreRefused,
	"Templates from elsewhere":                        refusedESO(awsStore, awsSpec("target:\n  template:\n    templateFrom:\n      - configMap: {name: t, items: [{key: k}]}"), "spec.target.template.templateFrom"),
	"Generators":                                      refusedPush("selector: {generatorRef: {kind: Password, name: g}}", "spec.selector.generatorRef"),
	// A store naming no identity converts only with --service-account.
	"A controller identity": {exists: func(t *testing.T, f *features) bool {
		return convert(t, f.b, docs(esoStore("SecretStore", "aws:\n  service: SecretsManager"), esoExternalSecret("SecretStore", ""))).ok()
	}},
	// What the list offers instead.
	"target.template.data": {want: true, exists: func(t *testing.T, f *features) bool {
		c := convert(t, f.b, docs(awsStore, esoExternalSecret("SecretStore", awsSpec("target:\n  template:\n    data:\n      dsn: 'db:{{ .password }}'"))))
		return c.ok() && strings.Contains(c.stdout, "keymount.io/template.dsn:")
	}},
	"keymount.io/template.<key>": {want: true, exists: func(t *testing.T, _ *features) bool {
		return sourceHas(t, "internal/template", `"keymount.io/template."`)
	}},
	"keymount convert": {want: true, exists: func(t *testing.T, f *features) bool {
		return slices.Contains(keymountCommands(t, f.b.help["keymount"]), "convert")
	}},
	"secretRef": refusedESO(esoStore("SecretStore", "aws:\n  service: SecretsManager\n  auth:\n    secretRef: {accessKeyIDSecretRef: {name: k, key: id}}"), "", "spec.provider.aws.auth.secretRef"),
	// vault-migration.md, From External Secrets' Vault store.
	"tokenSecretRef": vaultLoginRefused("tokenSecretRef"),
	"appRole":        vaultLoginRefused("appRole"),
	"jwt":            vaultLoginRefused("jwt"),
	"ldap":           vaultLoginRefused("ldap"),
	"cert":           vaultLoginRefused("cert"),
	"iam":            vaultLoginRefused("iam"),
	"userPass":       vaultLoginRefused("userPass"),
	"SecretSync":     {want: true, exists: func(t *testing.T, _ *features) bool { return slices.Contains(crdKinds(t), "SecretSync") }},

	"tls": vaultFieldRefused("tls", "{certSecretRef: {name: client}, keySecretRef: {name: client}}"),
	"vaultTLSClientCertPath": {want: true, exists: func(t *testing.T, _ *features) bool {
		return sourceHas(t, "provider/vault/spec", `"vaultTLSClientCertPath"`)
	}},
	"vaultTLSClientKeyPath": {want: true, exists: func(t *testing.T, _ *features) bool {
		return sourceHas(t, "provider/vault/spec", `"vaultTLSClientKeyPath"`)
	}},
	"remoteRef":           refusedESO(vaultStoreWith(""), "data:\n  - secretKey: password\n    remoteRef: {key: team-a/db}", "spec.data[0].remoteRef.property"),
	"property":            refusedESO(vaultStoreWith(""), "data:\n  - secretKey: password\n    remoteRef: {key: team-a/db, property: a.b}", "spec.data[0].remoteRef.property"),
	"readYourWrites":      vaultFieldRefused("readYourWrites", "true"),
	"forwardInconsistent": vaultFieldRefused("forwardInconsistent", "true"),
	"headers":             vaultFieldRefused("headers", "{X-Team: a}"),
	// copying-secrets.md.
	"secret-reflection-allowed":       {exists: func(t *testing.T, _ *features) bool { return sourceHas(t, "controller", "secret-reflection-allowed") }},
	"Certificate":                     {exists: func(t *testing.T, _ *features) bool { return sourceHas(t, "controller", "cert-manager.io") }},
	"spec.secretTemplate.annotations": {foreign: "cert-manager's Certificate field"},
	// compatibility.md: Windows nodes.
	"kubernetes.io/os: linux": {want: true, exists: func(t *testing.T, _ *features) bool {
		return fileHas(t, "deploy/daemonset.yaml", "kubernetes.io/os: linux")
	}},

	// migrating-from-external-secrets.md, PushSecret: writing to the store.
	"selector.generatorRef":           refusedPush("selector: {generatorRef: {kind: Password, name: g}}", "spec.selector.generatorRef"),
	"secretStoreRefs[].labelSelector": refusedPush("secretStoreRefs: [{labelSelector: {matchLabels: {push: \"true\"}}}]", "spec.secretStoreRefs[0].labelSelector"),
	"data[].metadata":                 refusedPush("data:\n  - match: {secretKey: password, remoteRef: {remoteKey: team-a/copy}}\n    metadata: {kind: PushSecretMetadata}", "spec.data[0].metadata"),
	"ReverseUnicode":                  refusedPush("data:\n  - match: {secretKey: password, remoteRef: {remoteKey: team-a/copy}}\n    conversionStrategy: ReverseUnicode", "spec.data[0].conversionStrategy"),
	"spec.template":                   refusedPush("template: {data: {password: x}}", "spec.template"),
}

// perNamespaceStoreRefused: convert refuses a ClusterExternalSecret whose
// store is a namespaced SecretStore.
var perNamespaceStoreRefused = featureCheck{exists: func(t *testing.T, f *features) bool {
	return !convert(t, f.b, docs(awsStore, otherKind("ClusterExternalSecret"))).refuses("spec.externalSecretSpec.secretStoreRef.kind")
}}

func testNoEquivalentNamesNoFeature(t *testing.T, b *binaries) {
	f := &features{b: b}
	used := map[string]bool{}
	lines := 0
	for _, file := range append(docFiles(t), "../README.md") {
		for _, s := range docSentences(t, file) {
			// A sentence that says something does not exist, or any
			// sentence of a list under a "What has no equivalent" heading.
			inList := s.bullet && noEquivalentPhrase.MatchString(s.heading)
			if !inList && !noEquivalentPhrase.MatchString(codeSpan.ReplaceAllString(s.text, "")) {
				continue
			}
			lines++
			terms := spans(s.text)
			if inList && s.lead != "" && len(spans(s.lead)) == 0 {
				terms = append(terms, s.lead) // the item's bold lead names it
			}
			for _, term := range terms {
				check, ok := noEquivalent[term]
				if !ok {
					t.Errorf("%s:%d says something does not exist and names `%s`, which help_test.go's noEquivalent has no check for: add one (or say it without naming it):\n  %s", s.file, s.line, term, s.text)
					continue
				}
				if used[term] {
					continue
				}
				used[term] = true
				if check.foreign != "" {
					continue
				}
				if got := check.exists(t, f); got != check.want {
					what := "says `%s` has no equivalent or is not supported, but it exists now: update the line"
					if check.want {
						what = "offers `%s` instead, which does not exist"
					}
					t.Errorf("%s:%d "+what+":\n  %s", s.file, s.line, term, s.text)
				}
			}
		}
	}
	if lines < 5 {
		t.Fatalf("found %d lines saying something has no equivalent or is not supported: is the parsing broken?", lines)
	}
	for term := range noEquivalent {
		if !used[term] {
			t.Errorf("noEquivalent checks `%s`, which no docs line says is missing or offers instead: remove it", term)
		}
	}
}

// helpDefaults parses the flags of every --help: flag name → the defaults
// the binaries print for it.
func helpDefaults(b *binaries) map[string][]string {
	out := map[string][]string{}
	flagLine := regexp.MustCompile(`^\s+--?([a-z][a-z0-9_-]*)(?:\s+(\S+))?\s*(.*)$`)
	def := regexp.MustCompile(`\(default:? ([^)]*)\)`)
	for _, help := range b.help {
		lines := strings.Split(help, "\n")
		for i, line := range lines {
			m := flagLine.FindStringSubmatch(line)
			if m == nil || strings.HasPrefix(strings.TrimSpace(line), "-- ") {
				continue
			}
			desc := m[3]
			// Go's flag package prints the usage on the next line.
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    \t") {
				desc = lines[i+1]
			}
			value := ""
			if d := def.FindAllStringSubmatch(desc, -1); len(d) > 0 {
				value = d[len(d)-1][1]
			}
			if (m[2] == "" || !slices.Contains([]string{"string", "int", "uint", "float", "duration", "value"}, m[2])) && value == "" {
				value = "false" // a boolean without a default
			}
			out[m[1]] = append(out[m[1]], value)
		}
	}
	return out
}

// sameDefault compares a default the docs state with one --help prints.
func sameDefault(doc, help string) bool {
	help = strings.Trim(strings.TrimSpace(help), `"`)
	if i := strings.Index(help, ", "); i > 0 && !strings.HasPrefix(doc, help[:i]+",") {
		help = help[:i] // "none, no tokens"
	}
	if doc == help {
		return true
	}
	d1, err1 := time.ParseDuration(doc)
	d2, err2 := time.ParseDuration(help)
	return err1 == nil && err2 == nil && d1 == d2
}

// docDefault is a default a docs table states for a flag: a "default"
// column, or "(default X)" after the flag in a cell.
var (
	docFlagSpan    = regexp.MustCompile("`--?([a-z][a-z0-9_-]*)`")
	docInlineValue = regexp.MustCompile("\\bdefault:?\\s+(`[^`]+`|[0-9][0-9.]*(?: ?(?:MiB|KiB|ms|s|m|h)\\b)?)")
	// docProseDefault is "`--flag` (default X", "`--flag` (N)" or
	// "`--flag`, N unit" in prose: X a code span or a number.
	docProseDefault = regexp.MustCompile("`--([a-z][a-z0-9-]*)`(?: \\(default:? (`[^-`][^`]*`|[0-9][0-9.]*(?: ?(?:MiB|KiB|Mi|Ki|ms|s|m|h|minutes|seconds)\\b)?)| \\(([0-9][0-9.]*(?: ?(?:MiB|KiB|Mi|Ki|ms|s|m|h)\\b)?)[;),]|, ([0-9][0-9.]*(?: ?(?:MiB|KiB|Mi|Ki|ms|s|m|h|minutes|seconds)\\b)))")
	docUnits        = regexp.MustCompile(`^([0-9]+) ?(MiB|KiB|ms|s|m|h|minutes|seconds)$`)
)

func testFlagDefaults(t *testing.T, b *binaries) {
	have := helpDefaults(b)
	if len(have["rotation-poll-interval"]) < 2 {
		t.Fatalf("--help parsing found %q for --rotation-poll-interval, want the driver's and the controller's", have["rotation-poll-interval"])
	}
	checked := 0
	for _, file := range append(docFiles(t), "../README.md") {
		defaultCol := -1
		for n, line := range strings.Split(readDoc(t, file), "\n") {
			cells := tableCells(line)
			switch {
			case !strings.HasPrefix(line, "|"):
				defaultCol = -1
				for _, m := range docProseDefault.FindAllStringSubmatch(line, -1) {
					cells = append(cells, m[1]+"\x00"+m[2]+m[3]+m[4])
				}
				for _, fv := range cells {
					if flag, value, ok := strings.Cut(fv, "\x00"); ok {
						checked += checkDefault(t, have, fmt.Sprintf("%s:%d", file, n+1), flag, value)
					}
				}
				continue
			case tableRule.MatchString(line):
				continue
			case defaultCol == -1 && slices.Contains(cells, "default") && strings.EqualFold(cells[0], "flag"):
				defaultCol = slices.Index(cells, "default")
				continue
			}
			for _, fv := range rowDefaults(cells, defaultCol) {
				checked += checkDefault(t, have, fmt.Sprintf("%s:%d", file, n+1), fv[0], fv[1])
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d flag defaults of the docs: is the parsing broken?", checked)
	}
}

// checkDefault checks the default the docs state for a flag at where,
// and returns 1 if the flag is keymount's (0 for another tool's).
func checkDefault(t *testing.T, have map[string][]string, where, flag, value string) int {
	t.Helper()
	defaults, ok := have[flag]
	if !ok {
		return 0 // not a keymount flag: TestFlagsInDocsExist
	}
	value = docValue(value)
	if !slices.ContainsFunc(defaults, func(h string) bool { return sameDefault(value, h) }) {
		t.Errorf("%s: --%s defaults to %q, but the binaries' --help say %q", where, flag, value, defaults)
	}
	return 1
}

// rowDefaults returns the flag defaults a table row states: flag and
// value pairs from its "default" column (defaultCol, -1 for none), and
// "(default X)" after a flag in any cell.
func rowDefaults(cells []string, defaultCol int) [][2]string {
	var out [][2]string
	flags := docFlagSpan.FindAllStringSubmatch(cells[0], -1)
	if defaultCol > 0 && defaultCol < len(cells) {
		if values := spans(cells[defaultCol]); len(values) == len(flags) {
			for i := range flags {
				out = append(out, [2]string{flags[i][1], values[i]})
			}
		}
	}
	for _, cell := range cells {
		for _, m := range docInlineValue.FindAllStringSubmatchIndex(cell, -1) {
			before := docFlagSpan.FindAllStringSubmatch(cell[:m[0]], -1)
			switch {
			case len(before) > 0:
				out = append(out, [2]string{before[len(before)-1][1], cell[m[2]:m[3]]})
			case cell != cells[0] && len(flags) == 1:
				out = append(out, [2]string{flags[0][1], cell[m[2]:m[3]]})
			}
		}
	}
	return out
}

// docValue is a value of the docs as --help prints it: "4 MiB" is
// 4194304, "60 s" 60s.
func docValue(value string) string {
	value = strings.Trim(value, "`")
	if m := docUnits.FindStringSubmatch(value); m != nil {
		value = m[1] + strings.NewReplacer("minutes", "m", "seconds", "s").Replace(m[2])
		if n, err := strconv.Atoi(m[1]); err == nil && strings.HasSuffix(m[2], "iB") {
			value = strconv.Itoa(n << map[string]int{"KiB": 10, "MiB": 20}[m[2]])
		}
	}
	return value
}
