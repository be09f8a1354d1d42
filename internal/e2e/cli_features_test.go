package e2e

import (
	"testing"

	"github.com/hashicorp/go-version"

	"github.com/overlayipam/terraform-provider-ipam/internal/tfcli"
)

// cliFeature is what a configuration or a command needs of the CLI under
// test: the first release of Terraform and of OpenTofu that has it ("": that
// CLI does not have it, as of the releases the suite was run with).
type cliFeature struct {
	name            string
	terraform, tofu string
}

var (
	featureFunctions = cliFeature{"provider functions", "1.8.0", "1.7.0"}
	featureIdentity  = cliFeature{"import by identity", "1.12.0", "1.12.0"}
	featureQuery     = cliFeature{"terraform query", "1.14.0", ""}
)

// lacks says why the CLI under test lacks f, naming the CLI, its version and
// the first release that has f; "" when it has f.
func lacks(t *testing.T, f cliFeature) string {
	t.Helper()
	c, v := cliOf(t, terraformBin), cliVersion(t)
	name, first := "Terraform", f.terraform
	if c.name == "tofu" {
		name, first = "OpenTofu", f.tofu
	}
	switch {
	case first == "":
		return f.name + " is not in " + name + " (this CLI is " + name + " " + v.String() + ")"
	case v.LessThan(version.Must(version.NewVersion(first))):
		return f.name + " needs " + name + " " + first + " or later, this CLI is " + v.String()
	}
	return ""
}

// requireCLI skips t, noting why, when the CLI under test lacks f.
func requireCLI(t *testing.T, f cliFeature) {
	t.Helper()
	if why := lacks(t, f); why != "" {
		tfcli.NoteSkip(t, why)
		t.Skip(why)
	}
}
