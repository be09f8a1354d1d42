import {
  to = ipam_pool.public_v4
  id = "fra1/public-v4"
}
