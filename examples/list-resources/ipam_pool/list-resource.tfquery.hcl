# The IPv4 add-on pools of cluster fra1, to adopt with
# `terraform query -generate-config-out=pools.tf`.
list "ipam_pool" "ipv4" {
  provider         = ipam
  include_resource = true
  config {
    cluster_id = "fra1"
    category   = "ipv4"
  }
}
