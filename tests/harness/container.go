package harness

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// InContainer does what runc does when a container starts, as far as its
// volumes go: it takes a copy of the node's mount table (a mount namespace
// of its own, private from then on, so nothing mounted or unmounted later
// reaches it), then runs check through it, as the container's process
// would read its volume at target. It runs on an OS thread of its own that
// exits afterwards, so the namespace never leaks into the test.
func InContainer(target string, check func(target string) error) error {
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread exits with this goroutine, and its
		// mount namespace with it.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- fmt.Errorf("unshare the mount namespace: %w", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- fmt.Errorf("make the container's mounts private: %w", err)
			return
		}
		done <- check(target)
	}()
	return <-done
}
