// Package classparams is what keymount's providers and driver share to
// refuse the class parameters, object fields and volume attributes they do
// not know: the keys the driver and keymount-controller add to every
// request (kubelet's csi.storage.k8s.io/* and secretProviderClass), and a
// class's opt-out keymount.io/ignore-parameters, the comma-separated keys
// its author declares safe to ignore (keys of newer upstream versions).
// Each caller words its own error: only it knows which of its versions
// knows a key.
package classparams
