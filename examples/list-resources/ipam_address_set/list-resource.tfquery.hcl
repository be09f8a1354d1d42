# The address sets of organization acme in cluster fra1, to adopt with
# `terraform query -generate-config-out=sets.tf`.
list "ipam_address_set" "acme" {
  provider         = ipam
  include_resource = true
  config {
    cluster_id = "fra1"
    org_id     = "acme"
  }
}
