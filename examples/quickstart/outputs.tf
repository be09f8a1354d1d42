output "node_prefix" {
  description = "Pool the node addresses come from."
  value       = ipam_cluster.demo.node_prefix
}

output "instance_prefix" {
  description = "Pool the instance addresses come from."
  value       = ipam_cluster.demo.instance_prefix
}

output "node_addresses" {
  description = "Node ID => allocated address."
  value       = { for id, n in ipam_node_address.node : id => n.address }
}

# The network block of web-1's WorkloadSpec.
output "web_network" {
  description = "Network settings for the web-1 instance."
  value = {
    overlay_ipv6 = ipam_instance_address.web.address
    gateway_ipv6 = ipam_instance_address.web.gateway_ipv6
    mtu          = ipam_instance_address.web.mtu
    dns_servers  = ipam_instance_address.web.dns_servers
  }
}
