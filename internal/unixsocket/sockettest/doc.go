// Package sockettest gives tests directories short enough for unix
// sockets, whatever TMPDIR or GOTMPDIR say.
//
// A unix socket path must fit in sun_path (108 bytes on Linux, counting
// the terminating NUL), and t.TempDir lives under TMPDIR with the test's
// name in it: a long TMPDIR or test name makes bind fail with "invalid
// argument". [Dir] builds the directory under /tmp instead, so a socket
// path's length depends only on what the test puts in it.
package sockettest
