terraform {
  required_providers {
    ipam = {
      source = "overlayipam/ipam"
    }
  }
}

variable "ipam_database_url" {
  description = "PostgreSQL connection string of the IPAM database. Leave null to use the IPAM_DATABASE_URL environment variable."
  type        = string
  sensitive   = true
  default     = null
}

provider "ipam" {
  # For example "postgres://ipam_runtime@db1.example.net:5432,db2.example.net:5432/ipam?sslmode=verify-full&target_session_attrs=read-write".
  # When null, the provider reads IPAM_DATABASE_URL, then the standard PG* variables.
  database_url = var.ipam_database_url

  max_connections   = 8                    # default 4; further requests queue
  auto_migrate      = true                 # default; false for a role that may not change the schema
  connect_timeout   = "5s"                 # per connection attempt (default "10s")
  lock_timeout      = "30s"                # a lock another session holds: ipam_busy past it (default)
  statement_timeout = "120s"               # one statement: ipam_timeout past it (default)
  failover_timeout  = "60s"                # ride out a switchover or failover this long (default "30s")
  actor             = "platform-terraform" # recorded with every allocation and event

  # Which configuration this is (default: IPAM_ORIGIN, else the working directory). Set it to a
  # stable name, one per configuration, wherever the directory changes from run to run: Atlantis,
  # CI runners with a checkout per job, a plan job and an apply job in different directories.
  origin = "platform/network"
}
