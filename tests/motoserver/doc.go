// Package motoserver is the one way tests start the real moto_server (a
// local AWS stand-in): bound to 127.0.0.1 only, on a port the kernel picks,
// stopped when the test ends, its output kept in a log file on request.
// Clients talk to it with fake static credentials and an explicit
// BaseEndpoint, so nothing can reach real AWS.
package motoserver
