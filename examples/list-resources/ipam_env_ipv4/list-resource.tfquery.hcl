# Every environment IPv4 handed out from one pool:
#   terraform query -generate-config-out=adopted.tf
list "ipam_env_ipv4" "public_v4" {
  provider         = ipam
  include_resource = true

  config {
    pool_id = "fra1/public-v4"
  }
}
