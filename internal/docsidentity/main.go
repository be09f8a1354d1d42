// Command docsidentity adds the provider's resource identity schemas to a
// schema exported by `terraform providers schema -json` that has none (a
// Terraform CLI older than 1.12 does not export them), so that the generated
// docs show each resource's identity whichever CLI exported the rest. It asks
// the provider itself, served in-process, as Terraform would.
//
//	go run ./internal/docsidentity SCHEMA.json   (rewritten in place)
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/hashicorp/terraform-json"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"

	"github.com/overlayipam/terraform-provider-ipam/internal/provider"
)

// address is the provider address scripts/docs.sh exports the schema under.
const address = "registry.terraform.io/hashicorp/ipam"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: docsidentity SCHEMA.json")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "docsidentity:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var schemas tfjson.ProviderSchemas
	if err := json.Unmarshal(raw, &schemas); err != nil {
		return err
	}
	ps, ok := schemas.Schemas[address]
	if !ok {
		return fmt.Errorf("%s has no schema for %s", path, address)
	}
	if len(ps.ResourceIdentitySchemas) > 0 {
		return nil // the CLI exported them
	}
	server, err := providerserver.NewProtocol6WithError(provider.New("docs")())()
	if err != nil {
		return err
	}
	resp, err := server.GetResourceIdentitySchemas(context.Background(), &tfprotov6.GetResourceIdentitySchemasRequest{})
	if err != nil {
		return err
	}
	for _, d := range resp.Diagnostics {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			return fmt.Errorf("%s: %s", d.Summary, d.Detail)
		}
	}
	ps.ResourceIdentitySchemas = map[string]*tfjson.IdentitySchema{}
	for name, s := range resp.IdentitySchemas {
		out := &tfjson.IdentitySchema{Version: uint64(s.Version), Attributes: map[string]*tfjson.IdentityAttribute{}}
		for _, a := range s.IdentityAttributes {
			if !a.Type.Is(tftypes.String) {
				return fmt.Errorf("%s.%s: only string identity attributes are converted, got %s", name, a.Name, a.Type)
			}
			out.Attributes[a.Name] = &tfjson.IdentityAttribute{IdentityType: cty.String, Description: a.Description,
				RequiredForImport: a.RequiredForImport, OptionalForImport: a.OptionalForImport}
		}
		ps.ResourceIdentitySchemas[name] = out
	}
	raw, err = json.Marshal(schemas)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}
