# An instance (one microVM) address from the cluster's instance prefix.
resource "ipam_instance_address" "example" {
  cluster_id  = ipam_cluster.example.id
  instance_id = "inst-7f3a9c"
  org_id      = "acme"
  env_id      = "production"
  node_id     = ipam_node_address.example.node_id # may change in place

  # A change of the cluster's gateway, MTU or DNS servers updates the
  # network block below in the same apply.
  cluster_network_revision = ipam_cluster.example.network_revision
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
