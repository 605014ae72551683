// Package harness runs keymount's CSI node plugin in-process for the test
// tiers under tests/: the csi-sanity suite, the conformance tests and the
// benchmarks.
//
// Start wires real parts only: the local provider served by the provider kit
// on a real unix socket, the driver on a real unix socket with a FileResolver
// over a class directory, and a volume manager that mounts real tmpfs
// volumes under a state directory. Everything lives in one short temporary
// directory (unix socket paths are limited to 108 bytes) that is removed when
// the test ends, after every mount left below it has been unmounted, so a
// failing test never leaks mounts into the next one.
//
// A node without Options.Cluster has no API server: nothing is reported and
// classes come from the class directory, as with the CLI. With it, each
// driver the harness starts gets the cluster side the option starts for it,
// typically cluster against a k8senv control plane, and resolves
// classes with that side's resolver:
//
//	h := harness.Start(t, harness.Options{
//		Cluster: func(ctx context.Context) (driver.Cluster, class.Resolver, error) {
//			cl, err := cluster.Start(ctx, cluster.Config{Rest: cfg, Node: "node-a", DriverName: driver.DefaultDriverName})
//			if err != nil {
//				return nil, nil, err
//			}
//			return cl, cl.Resolver(), nil
//		},
//	})
//
// The harness calls the driver the way kubelet does: target paths
// <base>/pods/<pod UID>/volumes/kubernetes.io~csi/<volume>/mount, volume IDs
// "csi-" + hex(sha256(pod UID + volume name)), and the volume context of an
// inline volume of a CSIDriver with podInfoOnMount.
//
// Tests must run as root: the driver mounts tmpfs and bind mounts.
package harness
