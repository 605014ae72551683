// Package unixsocket listens on a unix socket path without ever taking it
// away from a process that still serves on it.
//
// [Listen] creates the parent directory if it is missing, replaces a stale
// socket left by a process that died, and refuses, with an error wrapping
// [ErrInUse], to touch a socket another process still accepts connections
// on. It never removes anything that is not a socket. Concurrent Listen calls
// on one directory (from any process) are serialized with a flock on the
// directory, so two instances starting together cannot both decide a socket
// is stale and remove each other's.
//
// Closing the returned listener removes its socket only if the path still
// names the socket it created: a successor that bound the same path after
// the file was removed keeps its socket.
package unixsocket
