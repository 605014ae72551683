package vault

// Observer counts the provider's requests to Vault by operation (login,
// renew-self, revoke-self, GET, PUT, POST, metadata, renew).
// *metrics.Vault implements it.
type Observer interface {
	VaultRequest(op string, failed bool)
	// LeaseReissued: a leased object was requested again because its
	// lease, or the login it was issued under, ended or would end within
	// the margin (it could not be renewed past it).
	LeaseReissued()
}

// observer calls an Observer when there is one.
type observer struct{ o Observer }

func (o observer) request(op string) {
	if o.o != nil {
		o.o.VaultRequest(op, false)
	}
}

func (o observer) failure(op string) {
	if o.o != nil {
		o.o.VaultRequest(op, true)
	}
}

func (o observer) reissued() {
	if o.o != nil {
		o.o.LeaseReissued()
	}
}
