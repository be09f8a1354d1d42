# Refuse a node address that a hand-written value put outside the cluster's
# node prefix.
variable "node_overlay" {
  type    = string
  default = "2001:db8:100::5"
}

resource "terraform_data" "node" {
  input = var.node_overlay

  lifecycle {
    precondition {
      condition     = provider::ipam::cidr_contains(ipam_cluster.example.node_prefix, var.node_overlay)
      error_message = "The node address must lie inside the cluster's node prefix."
    }
  }
}
