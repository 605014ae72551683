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

	"github.com/keymount/keymount/provider/local"
	"github.com/keymount/keymount/provider/providercmd"
	"github.com/keymount/keymount/provider/server"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// config is every flag of the binary.
type config struct {
	// printVersion is --version: print the version and exit.
	printVersion bool
	server       server.Config
	root         string
	// allowedNamespaces is --allowed-namespaces: a comma-separated list of
	// the pod namespaces served, "" for all.
	allowedNamespaces string
}

func main() {
	cfg := parseFlags(flag.CommandLine, os.Args[1:])
	os.Exit(providercmd.Main("keymount-provider-local", version, cfg.printVersion, func(ctx context.Context) error {
		return run(ctx, cfg)
	}))
}

func parseFlags(fs *flag.FlagSet, args []string) *config {
	cfg := &config{}
	klog.InitFlags(fs)
	fs.StringVar(&cfg.root, "root", "", "directory whose files the provider serves (required)")
	fs.StringVar(&cfg.server.SocketDir, "provider-dir", "/var/run/secrets-store-csi-providers", "directory of provider sockets the driver searches")
	fs.StringVar(&cfg.server.Name, "name", "local", "provider name, as in SecretProviderClass spec.provider; the socket is <provider-dir>/<name>.sock")
	fs.StringVar(&cfg.allowedNamespaces, "allowed-namespaces", "", "comma-separated pod namespaces the provider serves; "+
		"a mount for a pod of any other namespace is refused with PermissionDenied (default: every namespace)")
	fs.BoolVar(&cfg.printVersion, "version", false, "print the version and exit")
	_ = fs.Parse(args) // flag.ExitOnError: Parse exits on a bad flag.
	cfg.server.Version = version
	return cfg
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
