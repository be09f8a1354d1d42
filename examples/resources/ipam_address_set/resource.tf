# A microVM with its IPv6 overlay address and two IPv4 addresses. The IPv4
# keys try the primary pool first and fall back to the overflow pool when it
# is full. Each key keeps its address across edits of the others.
resource "ipam_address_set" "vm" {
  cluster_id  = ipam_cluster.example.id
  owner_id    = "vm-7f3a"
  org_id      = "acme"
  env_id      = "shop-prod"
  instance_id = "vm-7f3a"

  addresses = {
    overlay = { family = "ipv6" } # from the cluster's instance prefix
    public  = { pools = [ipam_pool.public_v4.id, ipam_pool.overflow_v4.id] }
    egress  = { pools = [ipam_pool.public_v4.id, ipam_pool.overflow_v4.id] }
  }
}

output "vm_addresses" {
  value = { for k, a in ipam_address_set.vm.addresses : k => a.cidr }
}
