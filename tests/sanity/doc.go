// Package sanity runs the CSI sanity suite (github.com/kubernetes-csi/csi-test
// pkg/sanity) against keymount's node plugin over its real socket, with the
// local provider behind it. See sanity_test.go for what is skipped and why.
package sanity
