// Command keymount-provider-local is the local provider plugin: it serves
// files from a directory on the node to the Secrets Store CSI driver over
// <provider-dir>/<name>.sock.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"strings"

	"k8s.io/klog/v2"

	"github.com/keymount/keymount/internal/cliflag"
	"github.com/keymount/keymount/provider/local"
	"github.com/keymount/keymount/provider/providercmd"
	"github.com/keymount/keymount/provider/server"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// config is every flag of the binary.
type config struct {
	// probe is --probe and --probe-timeout: probe the provider serving
	// on the socket, then exit.
	probe providercmd.Probe
	// printVersion is --version: print the version and exit.
	printVersion bool
	server       server.Config
	root         string
	// allowedNamespaces is --allowed-namespaces: a comma-separated list of
	// the pod namespaces served, "" for all.
	allowedNamespaces string
}

func main() {
	cfg, err := parseFlags(flag.NewFlagSet("keymount-provider-local", flag.ContinueOnError), os.Args[1:])
	if err != nil {
		os.Exit(cliflag.ExitCode(err)) // Parse printed the usage, or one line naming the mistake.
	}
	if cfg.probe.On { // the container's liveness and readiness probe
		os.Exit(cfg.probe.Run(os.Stderr, "keymount-provider-local", cfg.server))
	}
	os.Exit(providercmd.Main("keymount-provider-local", version, cfg.printVersion, func(ctx context.Context) error {
		return run(ctx, cfg)
	}))
}

// parseFlags binds every flag into a config and parses args (see
// cliflag.Parse for what a mistake or --help prints).
func parseFlags(fs *flag.FlagSet, args []string) (*config, error) {
	cfg := &config{}
	klog.InitFlags(fs)
	fs.StringVar(&cfg.root, "root", "", "directory whose files the provider serves (required)")
	fs.StringVar(&cfg.server.SocketDir, "provider-dir", "/var/run/secrets-store-csi-providers", "directory of provider sockets the driver searches")
	fs.StringVar(&cfg.server.Name, "name", "local", "provider name, as in SecretProviderClass spec.provider; the socket is <provider-dir>/<name>.sock")
	fs.StringVar(&cfg.allowedNamespaces, "allowed-namespaces", "", "comma-separated pod namespaces the provider serves; "+
		"a mount for a pod of any other namespace is refused with PermissionDenied (default: every namespace)")
	cfg.probe.AddFlags(fs)
	fs.BoolVar(&cfg.printVersion, "version", false, "print the version and exit")
	if err := cliflag.Parse(fs, args); err != nil {
		return nil, err
	}
	cfg.server.Version = version
	return cfg, nil
}

func run(ctx context.Context, cfg *config) error {
	if cfg.root == "" {
		return errors.New("--root is required: the directory whose files the provider serves")
	}
	p, err := local.New(cfg.root, local.WithAllowedNamespaces(namespaceList(cfg.allowedNamespaces)...))
	if err != nil {
		return err
	}
	return providercmd.Serve(ctx, cfg.server, p, "root", p.Root(), "allowedNamespaces", p.AllowedNamespaces())
}

// namespaceList splits a comma-separated list, dropping blanks.
func namespaceList(s string) []string {
	var out []string
	for _, ns := range strings.Split(s, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}
