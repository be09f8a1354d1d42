package provider

import (
	"context"
	"errors"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

var (
	_ datasource.DataSource              = &poolUsageDataSource{}
	_ datasource.DataSourceWithConfigure = &poolUsageDataSource{}
)

// NewPoolUsageDataSource is the ipam_pool_usage data source.
func NewPoolUsageDataSource() datasource.DataSource { return &poolUsageDataSource{} }

type poolUsageDataSource struct{ store *ipam.Client }

type poolUsageDataSourceModel struct {
	ClusterID  types.String         `tfsdk:"cluster_id"`
	ID         types.String         `tfsdk:"id"`
	At         types.String         `tfsdk:"at"`
	Alert      types.Bool           `tfsdk:"alert"`
	Categories []usageCategoryModel `tfsdk:"categories"`
	Pools      []usagePoolModel     `tfsdk:"pools"`
}

type cooldownQueueModel struct {
	Count          types.Int64  `tfsdk:"count"`
	NextReusableAt types.String `tfsdk:"next_reusable_at"`
}

// usageFiguresModel holds the figures every category and pool entry has.
type usageFiguresModel struct {
	Size               types.Int64        `tfsdk:"size"`
	Active             types.Int64        `tfsdk:"active"`
	Reserved           types.Int64        `tfsdk:"reserved"`
	Cooling            types.Int64        `tfsdk:"cooling"`
	Free               types.Int64        `tfsdk:"free"`
	Utilization        types.Float64      `tfsdk:"utilization"`
	CooldownQueue      cooldownQueueModel `tfsdk:"cooldown_queue"`
	AllocationFailures types.Map          `tfsdk:"allocation_failures"`
	Alert              types.Bool         `tfsdk:"alert"`
}

type usageCategoryModel struct {
	Category types.String `tfsdk:"category"`
	Pools    types.Int64  `tfsdk:"pools"`
	usageFiguresModel
}

type usagePoolModel struct {
	PoolID   types.String `tfsdk:"pool_id"`
	Name     types.String `tfsdk:"name"`
	Category types.String `tfsdk:"category"`
	Family   types.Int64  `tfsdk:"family"`
	usageFiguresModel
}

func (d *poolUsageDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pool_usage"
}

// usageCountAttributes are the figures every category and pool entry has.
func usageCountAttributes(of string) map[string]schema.Attribute {
	count := func(desc string) schema.Int64Attribute {
		return schema.Int64Attribute{MarkdownDescription: desc, Computed: true}
	}
	return map[string]schema.Attribute{
		"size":     count("Addresses " + of + " can hand out (IPv6 pools are capped at 2^62)."),
		"active":   count("Active addresses."),
		"reserved": count("Plan-time holds that have not expired."),
		"cooling":  count("Released addresses inside their cooldown: not reusable yet."),
		"free":     count("Addresses that can be handed out now: `size - active - reserved - cooling` (an expired hold or a cooled-down address is free)."),
		"utilization": schema.Float64Attribute{
			MarkdownDescription: "`(active + reserved + cooling) / size`, from 0 to 1: the share that cannot be handed out now.",
			Computed:            true,
		},
		"cooldown_queue": schema.SingleNestedAttribute{
			MarkdownDescription: "The released addresses still cooling down.",
			Computed:            true,
			Attributes: map[string]schema.Attribute{
				"count": count("Addresses in the queue (same as `cooling`)."),
				"next_reusable_at": schema.StringAttribute{
					MarkdownDescription: "When the first of them becomes reusable (RFC 3339); null when the queue is empty.",
					Computed:            true,
				},
			},
		},
		"allocation_failures": schema.MapAttribute{
			MarkdownDescription: "Failed allocations of the last 24 hours, by reason (`ipam_exhausted`, `ipam_unavailable`).",
			ElementType:         types.Int64Type,
			Computed:            true,
		},
		"alert": schema.BoolAttribute{MarkdownDescription: "True when `utilization` is at or above 0.8.", Computed: true},
	}
}

func withAttributes(base map[string]schema.Attribute, more map[string]schema.Attribute) map[string]schema.Attribute {
	for k, v := range more {
		base[k] = v
	}
	return base
}

func (d *poolUsageDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{MarkdownDescription: desc, Computed: true}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reports the usage of a cluster's address pools: one entry per category (`node`, `instance`, " +
			"`ipv4`, and `ipv6` when the cluster has such pools) and one per pool, with size, active, reserved, cooling and " +
			"free addresses, utilization, the cooldown queue, the allocation failures of the last 24 hours and an alert flag " +
			"at 80 %. The figures are counted from the pools' indexes, so reading them stays fast on large pools.",
		Attributes: map[string]schema.Attribute{
			"cluster_id": schema.StringAttribute{
				MarkdownDescription: "The cluster to report on.",
				Required:            true,
				Validators:          []validator.String{validID("cluster_id")},
			},
			"id": computed("The cluster's name."),
			"at": computed("When the figures were read (RFC 3339, database time)."),
			"alert": schema.BoolAttribute{
				MarkdownDescription: "True when any category or pool is at or above 80 % utilization.",
				Computed:            true,
			},
			"categories": schema.ListNestedAttribute{
				MarkdownDescription: "One entry per category, in the order node, instance, ipv4, then the others.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{Attributes: withAttributes(usageCountAttributes("the category's pools"), map[string]schema.Attribute{
					"category": computed("`node`, `instance`, `ipv4` or `ipv6`."),
					"pools":    schema.Int64Attribute{MarkdownDescription: "How many pools the category has.", Computed: true},
				})},
			},
			"pools": schema.ListNestedAttribute{
				MarkdownDescription: "One entry per pool, by category and name.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{Attributes: withAttributes(usageCountAttributes("the pool"), map[string]schema.Attribute{
					"pool_id":  computed("The pool's id, `<cluster_id>/<name>`."),
					"name":     computed("The pool's name."),
					"category": computed("The pool's category."),
					"family":   schema.Int64Attribute{MarkdownDescription: "Address family: 4 or 6.", Computed: true},
				})},
			},
		},
	}
}

func (d *poolUsageDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.store = storeFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *poolUsageDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	if !requireStore(d.store, &resp.Diagnostics) {
		return
	}
	var cluster types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("cluster_id"), &cluster)...)
	if resp.Diagnostics.HasError() {
		return
	}
	u, err := operator.New(d.store).PoolUsage(ctx, cluster.ValueString())
	if errors.Is(err, ipam.ErrNotFound) {
		resp.Diagnostics.AddAttributeError(path.Root("cluster_id"), "Cluster Not Found", "No cluster is named "+cluster.ValueString()+".")
		return
	}
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Read Pool Usage", err)
		return
	}
	m := poolUsageDataSourceModel{ClusterID: cluster, ID: types.StringValue(u.ClusterID), At: timeString(u.At),
		Categories: []usageCategoryModel{}, Pools: []usagePoolModel{}}
	alert := false
	for _, c := range u.Categories {
		e := usageCategoryModel{Category: types.StringValue(c.Category), Pools: types.Int64Value(int64(c.Pools)),
			usageFiguresModel: usageFigures(c.UsageCounts, &resp.Diagnostics)}
		alert = alert || c.Alert
		m.Categories = append(m.Categories, e)
	}
	for _, p := range u.Pools {
		e := usagePoolModel{PoolID: types.StringValue(p.PoolID), Name: types.StringValue(p.Name),
			Category: types.StringValue(p.Category), Family: types.Int64Value(int64(p.Family)),
			usageFiguresModel: usageFigures(p.UsageCounts, &resp.Diagnostics)}
		alert = alert || p.Alert
		m.Pools = append(m.Pools, e)
	}
	m.Alert = types.BoolValue(alert)
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

func usageFigures(c operator.UsageCounts, diags *diag.Diagnostics) usageFiguresModel {
	queue := cooldownQueueModel{Count: types.Int64Value(c.CooldownQueue.Count), NextReusableAt: types.StringNull()}
	if next := c.CooldownQueue.NextReusableAt; next != nil {
		queue.NextReusableAt = timeString(*next)
	}
	elems := make(map[string]attr.Value, len(c.Failures))
	for reason, n := range c.Failures {
		elems[reason] = types.Int64Value(n)
	}
	failures, d := types.MapValue(types.Int64Type, elems)
	diags.Append(d...)
	return usageFiguresModel{Size: types.Int64Value(c.Size), Active: types.Int64Value(c.Active), Reserved: types.Int64Value(c.Reserved),
		Cooling: types.Int64Value(c.Cooling), Free: types.Int64Value(c.Free), Utilization: types.Float64Value(c.Utilization),
		CooldownQueue: queue, AllocationFailures: failures, Alert: types.BoolValue(c.Alert)}
}
