output "cluster_id" {
  description = "The cluster's ID (its name): the cluster_id of ipam_node_address, ipam_instance_address and the node-enrollment module."
  value       = ipam_cluster.this.id
}

output "prefix" {
  description = "The cluster's IPv6 prefix."
  value       = ipam_cluster.this.prefix
}

output "node_prefix" {
  description = "The sub-prefix the node overlay addresses come from (the WireGuard overlay network)."
  value       = ipam_cluster.this.node_prefix
}

output "instance_prefix" {
  description = "The sub-prefix the instance (microVM) addresses come from."
  value       = ipam_cluster.this.instance_prefix
}

output "node_cooldown" {
  description = "How long a released node address stays out of use."
  value       = ipam_cluster.this.node_cooldown
}

output "instance_cooldown" {
  description = "How long a released instance address stays out of use."
  value       = ipam_cluster.this.instance_cooldown
}

output "network" {
  description = "The WorkloadSpec network settings handed to instances: gateway_ipv6, mtu and dns_servers."
  value = {
    gateway_ipv6 = ipam_cluster.this.gateway_ipv6
    mtu          = ipam_cluster.this.mtu
    dns_servers  = ipam_cluster.this.dns_servers
  }
}

output "ipv4_pool_ids" {
  description = "Pool name => pool ID (`<cluster>/<pool>`): the pool_id of ipam_env_ipv4 and the environment-ipv4 module."
  value       = { for name, p in ipam_pool.ipv4 : name => p.id }
}

output "ipv4_pool_sizes" {
  description = "Pool name => number of addresses the pool can hand out (blocks minus network, broadcast, gateway and exclusions)."
  value       = { for name, p in ipam_pool.ipv4 : name => p.size }
}
