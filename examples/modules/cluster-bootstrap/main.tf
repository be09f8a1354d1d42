# A cluster with its IPv6 prefix (carved into a node and an instance
# sub-prefix), its cooldowns and WorkloadSpec network settings, plus the
# operator's IPv4 pools for the paid IPv4 add-on.

resource "ipam_cluster" "this" {
  name              = var.name
  prefix            = var.prefix
  node_prefix       = var.node_prefix
  instance_prefix   = var.instance_prefix
  node_cooldown     = var.node_cooldown
  instance_cooldown = var.instance_cooldown
  mtu               = var.mtu
  dns_servers       = var.dns_servers
  force_destroy     = var.force_destroy
}

resource "ipam_pool" "ipv4" {
  for_each = var.ipv4_pools

  cluster_id    = ipam_cluster.this.id
  name          = each.key
  cidrs         = each.value.cidrs
  exclude       = each.value.exclude
  cooldown      = each.value.cooldown
  gateway       = each.value.gateway
  mtu           = each.value.mtu
  force_destroy = var.force_destroy
}
