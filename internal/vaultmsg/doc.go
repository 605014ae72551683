// Package vaultmsg turns the messages of Vault's error answers into one
// line for status messages, events and gRPC errors. Vault folds the errors
// of one request into a single message in go-multierror's list format
// ("1 error occurred:\n\t* permission denied\n\n"); Join unfolds it, so
// what users read is Vault's own words: "permission denied".
package vaultmsg
