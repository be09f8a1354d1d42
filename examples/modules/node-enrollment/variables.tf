variable "cluster_id" {
  description = "The cluster the nodes join: its name, e.g. the cluster_id output of the cluster-bootstrap module."
  type        = string
  nullable    = false

  validation {
    condition     = length(var.cluster_id) <= 128 && can(regex("^[A-Za-z0-9][A-Za-z0-9._:@-]*$", var.cluster_id))
    error_message = "The cluster_id must be 1 to 128 characters: letters, digits, '.', '_', ':', '@', '-', starting with a letter or digit."
  }
}

variable "nodes" {
  description = "IDs of the nodes to enroll. Each gets a stable /128 on the WireGuard overlay from the cluster's node prefix. Removing a node releases its address into the cluster's node cooldown (30 days by default); re-adding the node meanwhile gets it back."
  type        = list(string)
  nullable    = false

  validation {
    condition     = alltrue([for n in var.nodes : try(length(n) <= 128 && can(regex("^[A-Za-z0-9][A-Za-z0-9._:@-]*$", n)), false)])
    error_message = "Every node ID must be 1 to 128 characters: letters, digits, '.', '_', ':', '@', '-', starting with a letter or digit."
  }

  validation {
    condition     = length(distinct(var.nodes)) == length(var.nodes)
    error_message = "Node IDs must be unique."
  }
}

variable "addresses" {
  description = "Optional node ID => overlay address to claim instead of the next free one, e.g. to keep the addresses of nodes enrolled before Terraform managed them. The address must lie in the cluster's node prefix and be free (or cooling and last held by the same node)."
  type        = map(string)
  default     = {}
  nullable    = false

  validation {
    condition     = alltrue([for a in values(var.addresses) : try(cidrhost("${a}/128", 0) != "" && strcontains(a, ":"), false)])
    error_message = "Every address must be a plain IPv6 address, e.g. \"2001:db8:abcd::10\"."
  }
}

variable "instance_blocks" {
  description = "Optional node ID => CIDR blocks of the instances hosted on that node, added to the node's WireGuard peer AllowedIPs with its /128, e.g. the blocks of its ipam_node_instance_blocks. Empty by default."
  type        = map(list(string))
  default     = {}
  nullable    = false

  validation {
    condition     = alltrue(flatten([for node, blocks in var.instance_blocks : [for b in blocks : can(cidrhost(b, 0))]]))
    error_message = "Every instance block must be a CIDR prefix, e.g. \"2001:db8:abcd:1:1::/80\"."
  }
}
