package metrics

import "sync/atomic"

// UnknownProvider is the provider label of every provider name whose
// socket was never found: a SecretProviderClass naming a provider that does
// not exist (a typo, or made up to flood the metrics) counts here, so the
// series a class can add are bounded. It cannot be a provider's name,
// which matches ^[a-zA-Z0-9_-]{0,30}$.
const UnknownProvider = "(unknown)"

// ProviderLabels turns a provider name into a provider label value: the
// name itself when the provider client has found its socket, else
// UnknownProvider; "" (no provider named) stays "". The zero value has
// found nothing, so every name is UnknownProvider until SetFound. Safe for
// concurrent use.
type ProviderLabels struct {
	found atomic.Pointer[func(provider string) bool]
}

// SetFound makes Label keep the names found reports true for: the provider
// client's Found (providerclient.Client.Found), true once it found the
// provider's socket.
func (p *ProviderLabels) SetFound(found func(provider string) bool) {
	p.found.Store(&found)
}

// Label is the provider label value of the provider name.
func (p *ProviderLabels) Label(name string) string {
	if name == "" {
		return ""
	}
	if f := p.found.Load(); f != nil && *f != nil && (*f)(name) {
		return name
	}
	return UnknownProvider
}
