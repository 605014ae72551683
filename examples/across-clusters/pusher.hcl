# Cluster A's pusher: write the certificate and record its Secret type.
path "secret/data/shared/wildcard-tls" {
  capabilities = ["create", "update", "read"]
}
path "secret/metadata/shared/wildcard-tls" {
  capabilities = ["read", "update"]
}
