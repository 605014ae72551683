//go:build !killpoints

package killpoint

// Reached does nothing: this build has no kill points.
func Reached(string) {}
