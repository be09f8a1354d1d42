// Command docsschema adds to a schema exported by `terraform providers schema
// -json` what an older CLI leaves out: the resource identity schemas
// (Terraform 1.12+) and the list resource schemas (1.14+), so that the
// generated docs are the same whichever CLI exported the rest. It asks the
// provider itself, served in-process, as Terraform would.
//
//	go run ./internal/docsschema SCHEMA.json   (rewritten in place)
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
		fmt.Fprintln(os.Stderr, "usage: docsschema SCHEMA.json")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "docsschema:", err)
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
	server, err := providerserver.NewProtocol6WithError(provider.New("docs")())()
	if err != nil {
		return err
	}
	ctx := context.Background()
	if len(ps.ResourceIdentitySchemas) == 0 {
		if ps.ResourceIdentitySchemas, err = identitySchemas(ctx, server); err != nil {
			return err
		}
	}
	if len(ps.ListResourceSchemas) == 0 {
		if ps.ListResourceSchemas, err = listSchemas(ctx, server); err != nil {
			return err
		}
	}
	raw, err = json.Marshal(schemas)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}

func diagnosticsError(diags []*tfprotov6.Diagnostic) error {
	for _, d := range diags {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			return fmt.Errorf("%s: %s", d.Summary, d.Detail)
		}
	}
	return nil
}

func identitySchemas(ctx context.Context, server tfprotov6.ProviderServer) (map[string]*tfjson.IdentitySchema, error) {
	resp, err := server.GetResourceIdentitySchemas(ctx, &tfprotov6.GetResourceIdentitySchemasRequest{})
	if err != nil {
		return nil, err
	}
	if err := diagnosticsError(resp.Diagnostics); err != nil {
		return nil, err
	}
	out := map[string]*tfjson.IdentitySchema{}
	for name, s := range resp.IdentitySchemas {
		is := &tfjson.IdentitySchema{Version: uint64(s.Version), Attributes: map[string]*tfjson.IdentityAttribute{}}
		for _, a := range s.IdentityAttributes {
			if !a.Type.Is(tftypes.String) {
				return nil, fmt.Errorf("%s.%s: only string identity attributes are converted, got %s", name, a.Name, a.Type)
			}
			is.Attributes[a.Name] = &tfjson.IdentityAttribute{IdentityType: cty.String, Description: a.Description,
				RequiredForImport: a.RequiredForImport, OptionalForImport: a.OptionalForImport}
		}
		out[name] = is
	}
	return out, nil
}

// listSchemas converts the list resources' configuration schemas, which
// are flat blocks of string and bool attributes.
func listSchemas(ctx context.Context, server tfprotov6.ProviderServer) (map[string]*tfjson.Schema, error) {
	resp, err := server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		return nil, err
	}
	if err := diagnosticsError(resp.Diagnostics); err != nil {
		return nil, err
	}
	out := map[string]*tfjson.Schema{}
	for name, s := range resp.ListResourceSchemas {
		if len(s.Block.BlockTypes) > 0 {
			return nil, fmt.Errorf("list resource %s: nested blocks are not converted", name)
		}
		b := &tfjson.SchemaBlock{Attributes: map[string]*tfjson.SchemaAttribute{}, Description: s.Block.Description,
			DescriptionKind: descriptionKind(s.Block.DescriptionKind)}
		for _, a := range s.Block.Attributes {
			ty := map[bool]cty.Type{true: cty.String, false: cty.Bool}[a.Type.Is(tftypes.String)]
			if (!a.Type.Is(tftypes.String) && !a.Type.Is(tftypes.Bool)) || a.NestedType != nil {
				return nil, fmt.Errorf("list resource %s.%s: only string and bool attributes are converted", name, a.Name)
			}
			b.Attributes[a.Name] = &tfjson.SchemaAttribute{AttributeType: ty, Description: a.Description,
				DescriptionKind: descriptionKind(a.DescriptionKind), Required: a.Required, Optional: a.Optional,
				Computed: a.Computed, Sensitive: a.Sensitive, Deprecated: a.Deprecated}
		}
		out[name] = &tfjson.Schema{Version: uint64(s.Version), Block: b}
	}
	return out, nil
}

func descriptionKind(k tfprotov6.StringKind) tfjson.SchemaDescriptionKind {
	if k == tfprotov6.StringKindMarkdown {
		return tfjson.SchemaDescriptionKindMarkdown
	}
	return tfjson.SchemaDescriptionKindPlain
}
