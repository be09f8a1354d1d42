import {
  to = ipam_env_ipv4.shop_prod
  identity = {
    pool_id = "fra1/public-v4"
    env_id  = "shop-prod"
  }
}
