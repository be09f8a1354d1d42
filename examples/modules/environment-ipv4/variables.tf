variable "pool_id" {
  description = "The IPv4 pool the address comes from, `<cluster_id>/<pool name>`: e.g. an ipv4_pool_ids value of the cluster-bootstrap module, or ipam_pool.<name>.id."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}/[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$", var.pool_id))
    error_message = "The pool_id must be <cluster_id>/<pool name>, e.g. \"prod/public-v4\"."
  }
}

variable "org_id" {
  description = "The organization that owns the environment."
  type        = string
  nullable    = false

  validation {
    condition     = length(var.org_id) <= 128 && can(regex("^[A-Za-z0-9][A-Za-z0-9._:@-]*$", var.org_id))
    error_message = "The org_id must be 1 to 128 characters: letters, digits, '.', '_', ':', '@', '-', starting with a letter or digit."
  }
}

variable "env_id" {
  description = "The environment that gets the IPv4 add-on: one dedicated address per environment."
  type        = string
  nullable    = false

  validation {
    condition     = length(var.env_id) <= 128 && can(regex("^[A-Za-z0-9][A-Za-z0-9._:@-]*$", var.env_id))
    error_message = "The env_id must be 1 to 128 characters: letters, digits, '.', '_', ':', '@', '-', starting with a letter or digit."
  }
}

variable "address" {
  description = "Optional: claim exactly this IPv4 address (a usable address of the pool that is free), e.g. one already published in DNS. Default (null): the oldest free address of the pool."
  type        = string
  default     = null

  validation {
    condition     = var.address == null || try(cidrhost("${var.address}/32", 0) != "" && !strcontains(var.address, ":"), false)
    error_message = "The address must be null or a plain IPv4 address, e.g. \"198.51.100.10\"."
  }
}
