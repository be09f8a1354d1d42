import {
  to = ipam_pool.public_v4
  identity = {
    cluster_id = "fra1"
    name       = "public-v4"
  }
}
