package tokens

// Invalidate drops the cached tokens of serviceAccount in namespace for the
// given audiences (all of its audiences when none are given), e.g. after a
// provider refused one: the next Tokens call requests new ones, and a
// request already running is not cached.
func (m *Manager) Invalidate(namespace, serviceAccount string, audiences ...string) {
	if len(audiences) == 0 {
		m.ForgetServiceAccount(namespace, serviceAccount)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, aud := range audiences {
		k := key{namespace, serviceAccount, aud}
		delete(m.slots, k)
		m.group.Forget(k.String())
	}
}

// ForgetServiceAccount drops every token of serviceAccount in namespace:
// call it when the service account is deleted (its tokens died with it).
func (m *Manager) ForgetServiceAccount(namespace, serviceAccount string) {
	m.forget(func(k key) bool { return k.namespace == namespace && k.serviceAccount == serviceAccount })
}

// ForgetNamespace drops every token of every service account in namespace:
// call it when the namespace is deleted.
func (m *Manager) ForgetNamespace(namespace string) {
	m.forget(func(k key) bool { return k.namespace == namespace })
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

// Prune drops every expired token and returns how many entries remain.
// Tokens calls it by itself at most once a minute.
func (m *Manager) Prune() int {
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

// Len returns the number of cached entries (tokens and requests under way).
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.slots)
}

// maybePrune runs Prune when the last one is a pruneInterval old.
func (m *Manager) maybePrune() {
	m.mu.Lock()
	due := m.clock.Since(m.lastPrune) >= pruneInterval
	m.mu.Unlock()
	if due {
		m.Prune()
	}
}
