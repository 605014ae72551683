package tokens

// forgetServiceAccount drops every token of serviceAccount in namespace:
// the service account is gone (its tokens died with it).
func (m *Manager) forgetServiceAccount(namespace, serviceAccount string) {
	m.forget(func(k key) bool { return k.namespace == namespace && k.serviceAccount == serviceAccount })
}

func (m *Manager) forget(match func(key) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.slots {
		if match(k) {
			delete(m.slots, k)
			m.group.Forget(k.String())
		}
	}
}

// prune drops every expired token and returns how many entries remain.
// Tokens calls it by itself at most once a minute.
func (m *Manager) prune() int {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastPrune = now
	for k, s := range m.slots {
		if s.token != nil && !now.Before(s.token.ExpirationTimestamp.Time) {
			delete(m.slots, k)
		}
	}
	return len(m.slots)
}

// entries returns the number of cached entries (tokens and requests under way).
func (m *Manager) entries() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.slots)
}

// maybePrune runs prune when the last one is a pruneInterval old.
func (m *Manager) maybePrune() {
	m.mu.Lock()
	due := m.clock.Since(m.lastPrune) >= pruneInterval
	m.mu.Unlock()
	if due {
		m.prune()
	}
}
