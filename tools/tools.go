//go:build tools

// Package tools pins the documentation tooling (tfplugindocs) in its own
// module, so that it does not add dependencies to the provider's go.mod.
// scripts/docs.sh (make docs) runs it with `go run` from this directory.
package tools

import (
	_ "github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs"
)
