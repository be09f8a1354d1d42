# Every cluster in the IPAM database, to adopt with
# `terraform query -generate-config-out=clusters.tf`.
list "ipam_cluster" "all" {
  provider         = ipam
  include_resource = true
}
