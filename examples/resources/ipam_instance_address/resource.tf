# An instance (one microVM) address from the cluster's instance prefix.
resource "ipam_instance_address" "example" {
  cluster_id  = ipam_cluster.example.id
  instance_id = "inst-7f3a9c"
  org_id      = "acme"
  env_id      = "production"
  node_id     = ipam_node_address.example.node_id # may change in place
}

# The network block of the instance's WorkloadSpec.
output "workload_network" {
  value = {
    overlay_ipv6 = ipam_instance_address.example.address
    gateway_ipv6 = ipam_instance_address.example.gateway_ipv6
    mtu          = ipam_instance_address.example.mtu
    dns_servers  = ipam_instance_address.example.dns_servers
  }
}
