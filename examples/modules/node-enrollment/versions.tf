terraform {
  # optional() object attributes (1.3), strcontains() (1.5).
  required_version = ">= 1.5.0"

  required_providers {
    ipam = {
      source = "overlayipam/ipam"
    }
  }
}
