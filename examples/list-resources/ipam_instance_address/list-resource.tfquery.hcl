# The instances the scheduler placed for one environment:
#   terraform query -generate-config-out=adopted.tf
list "ipam_instance_address" "shop_prod" {
  provider         = ipam
  include_resource = true

  config {
    cluster_id = "fra1"
    org_id     = "acme"
    env_id     = "shop-prod"
  }
}
