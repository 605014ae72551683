# Cluster B's reader: read the certificate, and its metadata to poll cheaply.
path "secret/data/shared/wildcard-tls" {
  capabilities = ["read"]
}
path "secret/metadata/shared/wildcard-tls" {
  capabilities = ["read"]
}
