package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cmd/keymount/internal/session"
	"github.com/keymount/keymount/driver/class"
)

// mountConfig is every flag of "keymount mount".
type mountConfig struct {
	classFile   string
	className   string
	kubeconfig  string
	kubeContext string
	target      string
	pod         session.Pod
	providerDir string
	localRoot   string
	stateDir    string
	readOnly    bool
	timeout     time.Duration
	verbose     bool
	// namespaceSet: --pod-namespace was given, so a namespaced class must match it.
	namespaceSet bool
}

// mountUsage is the help of "keymount mount", before its flags.
const mountUsage = `Usage: keymount mount -f class.yaml --target DIR [flags]
       keymount mount --kubeconfig FILE --class NAME --target DIR [flags]

Mounts the secrets of a SecretProviderClass on DIR through keymount's publish
pipeline: a private tmpfs, files written atomically, user-visible names as
symlinks into ..data. The driver publishes, as for a pod, into a private
kubelet-style directory under --state-dir; DIR is a read-only bind mount of
it. The mount stays after keymount exits; remove it with "keymount unmount
DIR". Mounting DIR again refreshes it. Needs root.

With --kubeconfig, the class NAME is read from the cluster's API server, in
--pod-namespace, instead of from a file. It is a dry run: only the class is
read, nothing is written to the cluster (no pod status, no Secret, no event).

Flags:
`

func newMountFlags(cfg *mountConfig, out io.Writer) *flag.FlagSet {
	fs := newFlagSet("mount", mountUsage, out)
	fs.StringVar(&cfg.classFile, "f", "", "the SecretProviderClass YAML `file` (required without --kubeconfig)")
	fs.StringVar(&cfg.kubeconfig, "kubeconfig", "", "read the class from the cluster of this kubeconfig `file` instead of -f (a dry run: nothing is written to the cluster)")
	fs.StringVar(&cfg.kubeContext, "context", "", "the kubeconfig context to use with --kubeconfig; its current context when not given")
	fs.StringVar(&cfg.target, "target", "", "the `dir`ectory to mount on, created if missing, else empty (required)")
	fs.StringVar(&cfg.className, "class", "", "the class to mount: required with --kubeconfig, and when the file holds several")
	fs.StringVar(&cfg.pod.Name, "pod-name", "keymount-cli", "the pod name the provider is told")
	fs.StringVar(&cfg.pod.Namespace, "pod-namespace", "default", "the pod namespace the provider is told, and with --kubeconfig the class's namespace; when not given, a class file's metadata.namespace or the kubeconfig context's namespace sets it")
	fs.StringVar(&cfg.pod.UID, "pod-uid", "", "the pod UID the provider is told; derived from --target when not given (a refresh keeps the UID of the first mount)")
	fs.StringVar(&cfg.pod.ServiceAccount, "service-account", "default", "the service account name the provider is told")
	fs.StringVar(&cfg.providerDir, "provider-dir", defaultProviderDir, "the `dir`ectory of provider sockets <provider>.sock")
	fs.StringVar(&cfg.localRoot, "local-root", "", "serve the local provider in-process from `dir` (searched before --provider-dir)")
	fs.StringVar(&cfg.stateDir, "state-dir", defaultStateDir, "the `dir`ectory holding each volume's tmpfs, record and private kubelet-style mount; unmount needs the same")
	fs.BoolVar(&cfg.readOnly, "read-only", true, "always on: the mount is read-only, as a secrets volume of a pod (readOnly: true) must be; --read-only=false is refused")
	fs.DurationVar(&cfg.timeout, "timeout", 60*time.Second, "give up after this long")
	fs.BoolVar(&cfg.verbose, "verbose", false, "print the driver's and provider's logs on stderr")
	return fs
}

// mountCommand runs "keymount mount".
func mountCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := &mountConfig{}
	fs := newMountFlags(cfg, stderr)
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErrorf("mount takes no arguments, got %q: name the directory with --target", rest)
	}
	cfg.namespaceSet = isSet(fs, "pod-namespace")
	if err := cfg.complete(); err != nil {
		return err
	}
	return runMount(ctx, cfg, stdout, stderr)
}

// complete checks the flags and fills in the defaults computed at run time.
func (c *mountConfig) complete() error {
	if err := c.checkSource(); err != nil {
		return err
	}
	switch {
	case c.target == "":
		return usageErrorf("mount: --target is required: name the directory to mount on")
	case c.timeout <= 0:
		return usageErrorf("mount: --timeout must be positive")
	case c.pod.Name == "" || c.pod.Namespace == "" || c.pod.ServiceAccount == "":
		return usageErrorf("mount: --pod-name, --pod-namespace and --service-account must not be empty")
	case !c.readOnly:
		return usageErrorf("mount: --read-only=false is not supported: keymount mounts secrets read-only, " +
			"as the driver requires readOnly: true of every secrets volume")
	}
	var err error
	for _, p := range []struct {
		flag string
		path *string
	}{{"--target", &c.target}, {"--state-dir", &c.stateDir}, {"--provider-dir", &c.providerDir}} {
		if *p.path, err = absPath(p.flag, *p.path); err != nil {
			return err
		}
	}
	return nil
}

// checkSource checks that the command line names one place to read the
// class from: a file, or a cluster and the class's name.
func (c *mountConfig) checkSource() error {
	switch {
	case c.classFile != "" && c.kubeconfig != "":
		return usageErrorf("mount: -f and --kubeconfig exclude each other: read the class from a file or from a cluster")
	case c.classFile == "" && c.kubeconfig == "":
		return usageErrorf("mount: -f or --kubeconfig is required: name the SecretProviderClass YAML file, or the cluster to read the class from")
	case c.kubeconfig != "" && c.className == "":
		return usageErrorf("mount: --class is required with --kubeconfig: name the SecretProviderClass to read from the cluster")
	case c.kubeContext != "" && c.kubeconfig == "":
		return usageErrorf("mount: --context needs --kubeconfig")
	}
	return nil
}

// runMount publishes the volume and prints what was mounted.
func runMount(ctx context.Context, cfg *mountConfig, stdout, stderr io.Writer) (err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	quietLogs(cfg.verbose)
	src, err := loadClass(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	s, err := session.Start(session.Config{
		Version: version, StateDir: cfg.stateDir, Classes: src.resolver,
		ProviderDir: cfg.providerDir, LocalRoot: cfg.localRoot, ProviderTimeout: cfg.timeout,
	})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close()) }()

	refresh, err := checkTarget(s, cfg)
	if err != nil {
		return err
	}
	v := session.Volume{Class: src.spc.Name, Target: cfg.target}
	if err := s.Publish(ctx, cfg.pod, v); err != nil {
		return newCallError(ctx, "mount", err)
	}
	if err := s.Bind(cfg.pod, cfg.target); err != nil {
		if !refresh {
			// A first mount that fails leaves nothing behind.
			if uerr := s.Unpublish(ctx, cfg.target); uerr != nil {
				err = errors.Join(err, newCallError(ctx, "clean up", uerr))
			}
		}
		return err
	}
	if refresh {
		if err := checkRefresh(s, cfg.target); err != nil {
			return err
		}
	}
	return printMounted(stdout, cfg, src)
}

// classSource is the class to mount, read before the mount to check it,
// and the resolver the in-process driver reads it through when it mounts.
type classSource struct {
	spc      *secretsstorev1.SecretProviderClass
	resolver class.Resolver
	// origin says where a class from a cluster came from; empty for a file.
	origin string
}

// loadClass reads the class to mount from the file or the cluster.
func loadClass(ctx context.Context, cfg *mountConfig, warnings io.Writer) (*classSource, error) {
	var src *classSource
	var err error
	if cfg.kubeconfig != "" {
		src, err = clusterClass(ctx, cfg, warnings)
	} else {
		src, err = fileClass(cfg)
	}
	if err != nil {
		return nil, err
	}
	if cfg.localRoot != "" && src.spc.Spec.Provider != "local" {
		return nil, usageErrorf("--local-root serves provider \"local\", but class %q uses provider %q", src.spc.Name, src.spc.Spec.Provider)
	}
	return src, nil
}

// fileClass reads the class file and picks the class to mount. A class
// with a namespace sets the pod's namespace unless --pod-namespace was given.
func fileClass(cfg *mountConfig) (*classSource, error) {
	data, err := os.ReadFile(cfg.classFile)
	if err != nil {
		return nil, fmt.Errorf("read class file: %w", err)
	}
	classes, err := class.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.classFile, err)
	}
	spc, err := pickClass(classes, cfg.className, cfg.classFile)
	if err != nil {
		return nil, err
	}
	if spc.Namespace != "" && !cfg.namespaceSet {
		cfg.pod.Namespace = spc.Namespace
	}
	return &classSource{spc: spc, resolver: &class.FileResolver{Paths: []string{cfg.classFile}}}, nil
}

func pickClass(classes []*secretsstorev1.SecretProviderClass, name, file string) (*secretsstorev1.SecretProviderClass, error) {
	names := make([]string, len(classes))
	for i, c := range classes {
		if c.Name == name || (name == "" && len(classes) == 1) {
			return c, nil
		}
		names[i] = c.Name
	}
	switch {
	case len(classes) == 0:
		return nil, fmt.Errorf("%s holds no SecretProviderClass", file)
	case name == "":
		return nil, usageErrorf("%s holds several classes (%s): choose one with --class", file, strings.Join(names, ", "))
	default:
		return nil, fmt.Errorf("%s holds no class %q (it holds %s)", file, name, strings.Join(names, ", "))
	}
}

// checkTarget tells a refresh of a volume mounted before with this state
// directory from a first mount, refuses targets keymount must not mount
// over, and settles the pod UID: a refresh keeps the first mount's, a first
// mount without --pod-uid derives one from the target.
func checkTarget(s *session.Session, cfg *mountConfig) (refresh bool, err error) {
	prev, err := s.Record(cfg.target)
	if err != nil {
		return false, err
	}
	if prev == nil {
		if cfg.pod.UID == "" {
			cfg.pod.UID = session.PodUID(cfg.target)
		}
		return false, checkNewTarget(cfg.target)
	}
	switch {
	case cfg.pod.UID == "":
		cfg.pod.UID = prev.PodUID
	case cfg.pod.UID != prev.PodUID:
		return false, fmt.Errorf("%s is mounted with --pod-uid %s: unmount it first to change that", cfg.target, prev.PodUID)
	}
	return true, nil
}

// checkNewTarget refuses to mount over another mount or over a directory
// that has files in it: the mount would hide them.
func checkNewTarget(target string) error {
	info, err := os.Stat(target)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("check target: %w", err)
	case !info.IsDir():
		return fmt.Errorf("target %s exists and is not a directory", target)
	}
	if mounted, err := isMountPoint(target); err != nil || mounted {
		return errors.Join(err, fmt.Errorf("target %s is a mount point already, not mounted by keymount with this --state-dir", target))
	}
	entries, err := os.ReadDir(target)
	if err != nil {
		return fmt.Errorf("check target: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("target %s is not empty: the mount would hide its files; choose an empty or new directory", target)
	}
	return nil
}

// checkRefresh reports a failed refresh of a volume that was already
// mounted. The driver answers OK then, as kubelet needs, keeps the old files
// and records the failure; a successful refresh clears it.
func checkRefresh(s *session.Session, target string) error {
	rec, err := s.Record(target)
	if err != nil {
		return err
	}
	if rec != nil && rec.LastError != "" {
		return fmt.Errorf("refresh failed, the files mounted before are kept: %s", rec.LastError)
	}
	return nil
}
