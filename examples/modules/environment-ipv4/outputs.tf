output "address" {
  description = "The environment's IPv4 address."
  value       = ipam_env_ipv4.this.address
}

output "cidr" {
  description = "The address with its block's prefix length, e.g. \"198.51.100.7/24\"."
  value       = ipam_env_ipv4.this.cidr
}

output "id" {
  description = "The resource ID, `<pool_id>/<env_id>`: also its import ID."
  value       = ipam_env_ipv4.this.id
}
