package tokens

// ForgetServiceAccount and Entries open the cache's eviction and size to the
// package's external tests.
func (m *Manager) ForgetServiceAccount(namespace, serviceAccount string) {
	m.forgetServiceAccount(namespace, serviceAccount)
}

func (m *Manager) Entries() int { return m.entries() }
