# The sub-prefixes ipam_cluster will carve, known at plan time: route the
# instance prefix before the cluster exists.
locals {
  cluster_prefix = "2001:db8:abcd::/48"
  sub            = provider::ipam::node_subprefixes(local.cluster_prefix)
}

output "node_prefix" {
  value = local.sub.node_prefix # 2001:db8:abcd::/64
}

output "instance_prefix" {
  value = local.sub.instance_prefix # 2001:db8:abcd:1::/64
}
