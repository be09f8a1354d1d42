# Usage of a cluster's pools, per category and per pool.
data "ipam_pool_usage" "fra1" {
  cluster_id = "fra1"
}

# Warn in every plan and apply when a category is at or above 80 % (a Terraform 1.5+ check block
# warns and does not fail; a postcondition on the data source would fail the plan instead).
check "ipam_capacity" {
  assert {
    condition = !data.ipam_pool_usage.fra1.alert
    error_message = join(", ", [
      for c in data.ipam_pool_usage.fra1.categories :
      "${c.category} at ${floor(c.utilization * 100)}%" if c.alert
    ])
  }
}

output "ipv4_free" {
  value = one([for c in data.ipam_pool_usage.fra1.categories : c.free if c.category == "ipv4"])
}
