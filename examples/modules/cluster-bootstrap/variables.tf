variable "name" {
  description = "Name of the cluster, unique in the IPAM database (1 to 128 characters: letters, digits, '.', '_', ':', '@', '-', starting with a letter or digit). Changing it replaces the cluster."
  type        = string
  nullable    = false

  validation {
    condition     = length(var.name) > 0 && length(var.name) <= 128 && can(regex("^[A-Za-z0-9][A-Za-z0-9._:@-]*$", var.name))
    error_message = "The name must be 1 to 128 characters: letters, digits, '.', '_', ':', '@', '-', starting with a letter or digit."
  }
}

variable "prefix" {
  description = "The cluster's IPv6 prefix, at least a /64 (ideally a /56 or /48), e.g. \"2001:db8:abcd::/48\". Prefixes of two clusters never overlap. Changing it replaces the cluster."
  type        = string
  nullable    = false

  validation {
    condition     = can(cidrhost(var.prefix, 0)) && strcontains(var.prefix, ":")
    error_message = "The prefix must be an IPv6 CIDR prefix such as \"2001:db8:abcd::/48\"."
  }

  validation {
    condition     = try(tonumber(split("/", var.prefix)[1]) <= 64, false)
    error_message = "The prefix must be a /64 or shorter (a /56 or /48 is better): node and instance addresses come from /64 sub-prefixes."
  }
}

variable "node_prefix" {
  description = "Sub-prefix of `prefix` the node overlay addresses come from. Default (null): sub-prefix #0 of length max(64, prefix length + 1), e.g. 2001:db8:abcd::/64 for 2001:db8:abcd::/48."
  type        = string
  default     = null

  validation {
    condition     = var.node_prefix == null || try(cidrhost(var.node_prefix, 0) != "" && strcontains(var.node_prefix, ":"), false)
    error_message = "The node_prefix must be null or an IPv6 CIDR prefix inside prefix."
  }
}

variable "instance_prefix" {
  description = "Sub-prefix of `prefix` the instance (microVM) addresses come from. Default (null): sub-prefix #1 of length max(64, prefix length + 1), e.g. 2001:db8:abcd:1::/64 for 2001:db8:abcd::/48. It must not overlap node_prefix."
  type        = string
  default     = null

  validation {
    condition     = var.instance_prefix == null || try(cidrhost(var.instance_prefix, 0) != "" && strcontains(var.instance_prefix, ":"), false)
    error_message = "The instance_prefix must be null or an IPv6 CIDR prefix inside prefix."
  }
}

variable "node_cooldown" {
  description = "How long a released node address stays out of use before anyone else may get it: Go duration syntax plus days, e.g. \"30d\", \"720h\"."
  type        = string
  default     = "30d"
  nullable    = false

  validation {
    condition     = var.node_cooldown != "" && can(regex("^([0-9]+d)?([0-9.]+(ns|us|µs|ms|s|m|h))*$", var.node_cooldown))
    error_message = "The node_cooldown must be a duration such as \"30d\", \"720h\" or \"1d12h\"."
  }
}

variable "instance_cooldown" {
  description = "How long a released instance address stays out of use (at least \"1h\"), e.g. \"24h\"."
  type        = string
  default     = "24h"
  nullable    = false

  validation {
    condition     = var.instance_cooldown != "" && can(regex("^([0-9]+d)?([0-9.]+(ns|us|µs|ms|s|m|h))*$", var.instance_cooldown))
    error_message = "The instance_cooldown must be a duration such as \"24h\" or \"2d\" (at least \"1h\")."
  }
}

variable "mtu" {
  description = "MTU handed to instances in their WorkloadSpec network block (1280 to 65535). Default (null): the provider's default, 1420 (the WireGuard overlay's)."
  type        = number
  default     = null

  validation {
    condition     = var.mtu == null || try(var.mtu >= 1280 && var.mtu <= 65535 && floor(var.mtu) == var.mtu, false)
    error_message = "The mtu must be a whole number between 1280 and 65535."
  }
}

variable "dns_servers" {
  description = "IPv6 DNS servers handed to instances (default none)."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for s in var.dns_servers : try(cidrhost("${s}/128", 0) != "" && strcontains(s, ":"), false)])
    error_message = "Every DNS server must be a plain IPv6 address, e.g. \"2001:db8::53\"."
  }
}

variable "ipv4_pools" {
  description = <<-EOT
    IPv4 pools of the cluster (for the paid IPv4 add-on), by pool name. Each pool has:
    `cidrs` (IPv4 blocks, earlier ones handed out first), `exclude` (addresses or blocks never
    handed out, default none), `cooldown` (how long a released address stays out of use,
    default "24h"), and optionally `gateway` and `mtu` of the pool's network.
    Pool names follow the same rules as the cluster name and may not be "node" or "instance".
  EOT
  type = map(object({
    cidrs    = list(string)
    exclude  = optional(list(string), [])
    cooldown = optional(string, "24h")
    gateway  = optional(string)
    mtu      = optional(number)
  }))
  default  = {}
  nullable = false

  validation {
    condition = alltrue([
      for name in keys(var.ipv4_pools) :
      length(name) <= 128 && can(regex("^[A-Za-z0-9][A-Za-z0-9._:@-]*$", name)) && !contains(["node", "instance"], name)
    ])
    error_message = "Pool names must be 1 to 128 characters (letters, digits, '.', '_', ':', '@', '-', starting with a letter or digit) and not \"node\" or \"instance\"."
  }

  validation {
    condition = alltrue([
      for p in values(var.ipv4_pools) :
      length(p.cidrs) > 0 && alltrue([for c in p.cidrs : can(cidrhost(c, 0)) && !strcontains(c, ":")])
    ])
    error_message = "Every pool needs at least one block in cidrs, and every block must be an IPv4 CIDR prefix such as \"198.51.100.0/24\"."
  }

  validation {
    condition = alltrue(flatten([
      for p in values(var.ipv4_pools) : [
        for e in p.exclude : !strcontains(e, ":") && (can(cidrhost(e, 0)) || can(cidrhost("${e}/32", 0)))
      ]
    ]))
    error_message = "Every exclude entry must be an IPv4 address (\"198.51.100.1\") or CIDR prefix (\"198.51.100.240/28\")."
  }

  validation {
    condition = alltrue([
      for p in values(var.ipv4_pools) :
      (p.gateway == null || can(cidrhost("${p.gateway}/32", 0))) && (p.mtu == null || try(p.mtu >= 68 && p.mtu <= 65535, false))
    ])
    error_message = "A pool's gateway must be null or an IPv4 address, and its mtu null or between 68 and 65535."
  }

  validation {
    condition     = alltrue([for p in values(var.ipv4_pools) : p.cooldown != "" && can(regex("^([0-9]+d)?([0-9.]+(ns|us|µs|ms|s|m|h))*$", p.cooldown))])
    error_message = "A pool's cooldown must be a duration such as \"24h\" or \"7d\"."
  }
}

variable "force_destroy" {
  description = "Release the active addresses of the cluster and its pools into their cooldown when they are destroyed. Only for active allocations that no Terraform state manages. Default false: a destroy fails while an address is active and says how many are; cooling addresses never block it."
  type        = bool
  default     = false
  nullable    = false
}
