package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/keymount/keymount/cmd/keymount/internal/convert"
)

// convertConfig is every flag of "keymount convert".
type convertConfig struct {
	files            fileList
	output           string
	partial          bool
	serviceAccount   string
	roleARN          string
	podIdentity      bool
	clusterNamespace string
}

// fileList is a repeatable -f.
type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

// errConvertIncomplete: the input holds what the output cannot express.
var errConvertIncomplete = errors.New("convert: the input holds fields keymount cannot express (listed above); fix them, or pass --partial to write the rest")

// convertUsage is the help of "keymount convert", before its flags.
const convertUsage = `Usage: keymount convert -f FILE [-f FILE...] [flags]

Converts External Secrets manifests into a SecretProviderClass and a
SecretSync each, which make keymount-controller write the same Secret:

  External Secrets Operator ExternalSecrets and ClusterExternalSecrets
  (external-secrets.io/v1 and external-secrets.io/v1beta1), with the
  SecretStore or ClusterSecretStore each names:
    provider aws: services SecretsManager and ParameterStore (class provider aws)
    provider vault: KV versions v1 and v2, login auth.kubernetes (class provider vault)
  Kubernetes External Secrets ExternalSecrets (kubernetes-client.io/v1):
    backends secretsManager and systemManager (class provider aws)
  External Secrets Operator PushSecrets (external-secrets.io/v1alpha1),
    into a SecretProviderClass and a keymount.io/v1alpha1 PushSecret per
    store they name (provider aws or vault, as above)

A ClusterExternalSecret becomes one SecretProviderClass and SecretSync in
--cluster-namespace (written with its Namespace) whose Secret
keymount-controller's fan-out (--enable-fanout) copies into every namespace
the ClusterExternalSecret selects, and removes from those that stop
matching. A store on External Secrets' controller identity (no auth, or a
role to assume) reads as a ServiceAccount keymount-<store> that convert
writes in the SecretSync's namespace, with the role (the store's role, else
--role-arn) as IRSA's eks.amazonaws.com/role-arn, or for EKS Pod Identity
(--pod-identity) the association to make listed on stderr.

Whatever cannot be expressed is listed on stderr with its field path, and
keymount exits 1 without output unless --partial is given. Nothing is sent
to a cluster.

Flags:
`

func newConvertFlags(cfg *convertConfig, out io.Writer) *flag.FlagSet {
	fs := newFlagSet("convert", convertUsage, out)
	fs.Var(&cfg.files, "f", "a `file` of ExternalSecrets or ClusterExternalSecrets and their SecretStores or ClusterSecretStores (multi-document YAML); - reads stdin; repeat for more files")
	fs.Var(&cfg.files, "filename", "same as -f")
	fs.StringVar(&cfg.output, "o", "", "write the output to this `file` instead of stdout")
	fs.StringVar(&cfg.output, "output", "", "same as -o")
	fs.BoolVar(&cfg.partial, "partial", false, "write what can be converted even when some fields cannot (they are still listed on stderr), and exit 0")
	fs.StringVar(&cfg.serviceAccount, "service-account", "", "the SecretSync's serviceAccountName where the input names none (Kubernetes External Secrets; a store without jwt auth, role or --role-arn)")
	fs.StringVar(&cfg.roleARN, "role-arn", "", "the IAM `role` External Secrets' controller read as: an AWS store without auth or role, or whose jwt serviceAccountRef is of another namespace, reads as a ServiceAccount keymount-<store> written with it")
	fs.BoolVar(&cfg.podIdentity, "pod-identity", false, "the ServiceAccounts convert writes read with EKS Pod Identity (their classes set usePodIdentity; the associations to make are listed on stderr) instead of IRSA's annotation")
	fs.StringVar(&cfg.clusterNamespace, "cluster-namespace", convert.DefaultClusterNamespace, "the `namespace` of ClusterExternalSecrets' SecretProviderClasses and SecretSyncs (convert writes it)")
	return fs
}

// convertCommand runs "keymount convert".
func convertCommand(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg := &convertConfig{}
	fs := newConvertFlags(cfg, stderr)
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	cfg.files = append(cfg.files, rest...)
	if len(cfg.files) == 0 {
		return usageErrorf("convert: no input; pass -f FILE, or -f - to read stdin")
	}
	inputs, closeAll, err := openInputs(cfg.files, stdin)
	if err != nil {
		return err
	}
	defer closeAll()
	res, err := convert.Convert(inputs, convert.Options{
		ServiceAccount: cfg.serviceAccount, RoleARN: cfg.roleARN,
		PodIdentity: cfg.podIdentity, ClusterNamespace: cfg.clusterNamespace,
	})
	if err != nil {
		return err
	}
	fatal := 0
	for _, is := range res.Issues {
		prefix := "keymount: "
		if is.Note {
			prefix = "keymount: note: "
		} else {
			fatal++
		}
		_, _ = fmt.Fprintln(stderr, prefix+is.String())
	}
	if fatal > 0 && !cfg.partial {
		return errConvertIncomplete
	}
	var buf bytes.Buffer
	if err := res.Write(&buf); err != nil {
		return err
	}
	if cfg.output == "" {
		_, err = stdout.Write(buf.Bytes())
		return err
	}
	return os.WriteFile(cfg.output, buf.Bytes(), 0o644) //nolint:gosec // G306: manifests, no secret values.
}

// openInputs opens every file; "-" is stdin, read once.
func openInputs(files []string, stdin io.Reader) ([]convert.Input, func(), error) {
	var inputs []convert.Input
	var opened []*os.File
	closeAll := func() {
		for _, f := range opened {
			_ = f.Close()
		}
	}
	usedStdin := false
	for _, name := range files {
		if name == "-" {
			if usedStdin {
				closeAll()
				return nil, nil, usageErrorf("convert: -f - (stdin) given twice")
			}
			usedStdin = true
			inputs = append(inputs, convert.Input{Name: "stdin", R: stdin})
			continue
		}
		f, err := os.Open(name) //nolint:gosec // G703: the user names the files to read on the command line.
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("convert: %w", err)
		}
		opened = append(opened, f)
		inputs = append(inputs, convert.Input{Name: name, R: f})
	}
	return inputs, closeAll, nil
}
