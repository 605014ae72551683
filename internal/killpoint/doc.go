// Package killpoint marks the steps of the driver where a crash test kills
// the process: Reached("write.swapped") names the moment right after a step.
//
// The default build compiles Reached to nothing. A build with the tag
// killpoints (only tests/hostile builds one) reads the environment variable
// KEYMOUNT_KILLPOINT, "name" or "name:n", and sends SIGKILL to its own
// process the first (or n-th) time that point is reached, after writing
// "killpoint <name>" to standard error. Production binaries carry no test
// behaviour: the variable means nothing to them.
package killpoint

// EnvVar names the point a killpoints build dies at.
const EnvVar = "KEYMOUNT_KILLPOINT"
