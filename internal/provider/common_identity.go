package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// resourceIdentity is a resource's identity (Terraform 1.12+): attributes of
// its state that name one remote object, in the order of its string import
// id, whose parts they are, joined by "/".
type resourceIdentity []identityAttribute

type identityAttribute struct{ name, description string }

var (
	clusterIdentity     = resourceIdentity{{"name", "The cluster's name."}}
	poolIdentity        = resourceIdentity{clusterIDIdentity, {"name", "The pool's name in its cluster."}}
	nodeAddressIdentity = resourceIdentity{clusterIDIdentity, {"node_id", "The node's id."}}
	instanceIdentity    = resourceIdentity{clusterIDIdentity, {"instance_id", "The instance's id."}}
	envIPv4Identity     = resourceIdentity{{"pool_id", "The IPv4 pool's id, `<cluster_id>/<pool name>`."}, {"env_id", "The environment's id."}}
	addressSetIdentity  = resourceIdentity{clusterIDIdentity, {"owner_id", "The set's owner id."}}
	nodeBlocksIdentity  = resourceIdentity{clusterIDIdentity, {"node_id", "The node's id."}}
	clusterIDIdentity   = identityAttribute{"cluster_id", "The cluster's name."}
)

var (
	_ resource.ResourceWithIdentity = &clusterResource{}
	_ resource.ResourceWithIdentity = &poolResource{}
	_ resource.ResourceWithIdentity = &nodeAddressResource{}
	_ resource.ResourceWithIdentity = &instanceAddressResource{}
	_ resource.ResourceWithIdentity = &envIPv4Resource{}
	_ resource.ResourceWithIdentity = &addressSetResource{}
	_ resource.ResourceWithIdentity = &nodeBlocksResource{}
)

// schema is the identity schema: every attribute a string, all required to
// import by identity.
func (ri resourceIdentity) schema() identityschema.Schema {
	attrs := make(map[string]identityschema.Attribute, len(ri))
	for _, a := range ri {
		attrs[a.name] = identityschema.StringAttribute{RequiredForImport: true, Description: a.description}
	}
	return identityschema.Schema{Attributes: attrs}
}

// set copies the identity from state (after a create, read, update or
// import). A read that removes the resource (gone from the database) still
// answers with its identity, taken from prior, the state it read (Terraform
// wants one after every read without errors).
func (ri resourceIdentity) set(ctx context.Context, state *tfsdk.State, identity *tfsdk.ResourceIdentity, diags *diag.Diagnostics, prior ...*tfsdk.State) {
	if state.Raw.IsNull() && len(prior) > 0 {
		state = prior[0]
	}
	if identity == nil || state.Raw.IsNull() || diags.HasError() {
		return
	}
	// The state's values as they are, into a new identity object (what
	// Set checks, checked here): what GetAttribute and SetAttribute per
	// attribute did, without two walks of the schema for each.
	var attrs map[string]tftypes.Value
	if err := state.Raw.As(&attrs); err != nil {
		diags.AddError("Unable to Set Resource Identity", "reading the state: "+err.Error())
		return
	}
	vals := make(map[string]tftypes.Value, len(ri))
	for _, a := range ri {
		v, ok := attrs[a.name]
		if !ok {
			diags.AddAttributeError(path.Root(a.name), "Unable to Set Resource Identity", "the state has no attribute "+a.name)
			return
		}
		vals[a.name] = v
	}
	typ := identity.Schema.Type().TerraformType(ctx)
	if err := tftypes.ValidateValue(typ, vals); err != nil {
		diags.AddError("Unable to Set Resource Identity", err.Error())
		return
	}
	identity.Raw = tftypes.NewValue(typ, vals)
}

// importID is the string id to import: the one given (`terraform import`,
// an import block's id), or the identity's attributes joined by "/".
func (ri resourceIdentity) importID(ctx context.Context, req resource.ImportStateRequest, diags *diag.Diagnostics) (string, bool) {
	if req.ID != "" || req.Identity == nil {
		return req.ID, true
	}
	parts := make([]string, 0, len(ri))
	for _, a := range ri {
		var v types.String
		diags.Append(req.Identity.GetAttribute(ctx, path.Root(a.name), &v)...)
		if diags.HasError() {
			return "", false
		}
		if v.IsNull() || v.IsUnknown() || v.ValueString() == "" {
			diags.AddAttributeError(path.Root(a.name), "Invalid Import Identity", "identity."+a.name+" is required: "+a.description)
			return "", false
		}
		parts = append(parts, v.ValueString())
	}
	return ri.format(parts...), true
}

// format is the string import id of the identity's values, in its order:
// the one formatter of import ids, which every hint naming one uses.
func (ri resourceIdentity) format(values ...string) string {
	return strings.Join(values, "/")
}

// importHint says how to import what a core error says already exists or is
// held (an owner's allocation, a cluster, a pool) into the resource that
// manages it, with the import id built by that resource's formatter; "" for
// any other error.
func importHint(err error) string {
	typ, id := importTarget(err)
	if typ == "" {
		return ""
	}
	return fmt.Sprintf("To manage it from this configuration, import it: terraform import %s.NAME %s "+
		"(or an import block: to = %s.NAME, id = %q).", typ, id, typ, id)
}

// importTarget is the resource type and import id of what err names.
func importTarget(err error) (typ, id string) {
	var oc *ipam.OwnerConflictError
	var ce *ipam.ConflictError
	switch {
	case errors.As(err, &oc) && !oc.Held && !oc.OtherTenant:
		switch oc.OwnerKind {
		case ipam.OwnerNode:
			return "ipam_node_address", nodeAddressIdentity.format(oc.ClusterID, oc.OwnerID)
		case ipam.OwnerInstance:
			return "ipam_instance_address", instanceIdentity.format(oc.ClusterID, oc.OwnerID)
		case ipam.OwnerEnvIPv4:
			return "ipam_env_ipv4", envIPv4Identity.format(oc.PoolID, oc.OwnerID)
		case ipam.OwnerSet:
			return "ipam_address_set", addressSetIdentity.format(oc.ClusterID, oc.SetID)
		case ipam.OwnerNodeBlocks:
			return "ipam_node_instance_blocks", nodeBlocksIdentity.format(oc.ClusterID, oc.OwnerID)
		}
	case errors.As(err, &ce):
		switch ce.ExistingKind {
		case "cluster":
			return "ipam_cluster", clusterIdentity.format(ce.ExistingID)
		case "pool":
			cluster, name, _ := strings.Cut(ce.ExistingID, "/")
			return "ipam_pool", poolIdentity.format(cluster, name)
		}
	}
	return "", ""
}
