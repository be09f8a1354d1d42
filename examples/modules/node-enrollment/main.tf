# One stable overlay /128 per node, and the WireGuard peer AllowedIPs of each
# node: its /128 and the instance blocks it hosts, as the fewest CIDRs.

resource "ipam_node_address" "this" {
  for_each = toset(var.nodes)

  cluster_id = var.cluster_id
  node_id    = each.key
  address    = lookup(var.addresses, each.key, null)
}

locals {
  allowed_ips = {
    for node, a in ipam_node_address.this :
    node => provider::ipam::wireguard_allowed_ips(concat([a.cidr], lookup(var.instance_blocks, node, [])))
  }
}
