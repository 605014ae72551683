// Package childproc starts the processes a test runs beside it (a driver, a
// provider, a fake server) so that they die with the test binary, reaps them,
// and stops them: SIGTERM, then SIGKILL after a grace period.
//
//	p, err := childproc.Start(exec.Command("keymount-driver", args...))
//	...
//	select {
//	case <-p.Exited():
//		return fmt.Errorf("driver exited: %w", p.Err())
//	case <-ready:
//	}
//	...
//	if err := p.Stop(15 * time.Second); err != nil { // SIGTERM, a clean exit wanted
//		t.Error(err)
//	}
//
// Every child gets a parent-death SIGKILL. Linux sends that signal when the
// thread that forked the child ends, not the process: a child forked from an
// ordinary goroutine would be killed whenever the Go runtime retired that
// thread. So children are forked from one goroutine locked to its OS thread,
// a Forker. Start uses one that lives as long as the test binary; a Forker of
// one's own ties its children to its Close as well. When the test binary dies
// (a panic, go test's -timeout, SIGKILL) every thread ends and the children
// die with it.
//
// Linux only.
package childproc
