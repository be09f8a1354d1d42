import {
  to = ipam_env_ipv4.shop_prod
  id = "fra1/public-v4/shop-prod"
}
