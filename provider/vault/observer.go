package vault

// Observer counts the provider's requests to Vault by operation (login,
// renew-self, revoke-self, GET, PUT, POST, metadata, renew).
// *metrics.Vault implements it.
type Observer interface {
	VaultRequest(op string, failed bool)
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
