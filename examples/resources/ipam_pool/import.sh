# A pool is imported by <cluster_id>/<name>.
terraform import ipam_pool.public_v4 fra1/public-v4
