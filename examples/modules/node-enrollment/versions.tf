terraform {
  # optional() object attributes (1.3), strcontains() (1.5), provider
  # functions (1.8).
  required_version = ">= 1.8.0"

  required_providers {
    ipam = {
      source = "overlayipam/ipam"
    }
  }
}
