# An environment IPv4 is imported by <cluster_id>/<pool name>/<env_id>.
terraform import ipam_env_ipv4.shop_prod fra1/public-v4/shop-prod
