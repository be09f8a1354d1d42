package provider

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The hot resources (one per address, thousands in a configuration) move
// their models to and from the plan and the state through the schema's
// object value, not through the plugin framework's struct reflection:
// terraform-plugin-framework 1.19 compiles a regular expression for every
// field of every struct it reads or writes (internal/reflect.isValidFieldName),
// up to a tenth of the provider's CPU in a refresh. getModel and setModel read the
// same `tfsdk` tags, once per model type.

// modelFields are a model struct's `tfsdk`-tagged fields, embedded structs
// included, by attribute name.
type modelFields struct {
	names []string
	index [][]int
}

var modelFieldsCache sync.Map // reflect.Type -> *modelFields

func fieldsOf(t reflect.Type) *modelFields {
	if f, ok := modelFieldsCache.Load(t); ok {
		return f.(*modelFields)
	}
	f := &modelFields{}
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			idx := append(append([]int(nil), prefix...), i)
			if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
				walk(sf.Type, idx)
				continue
			}
			if name := sf.Tag.Get("tfsdk"); name != "" && name != "-" {
				f.names = append(f.names, name)
				f.index = append(f.index, idx)
			}
		}
	}
	walk(t, nil)
	modelFieldsCache.Store(t, f)
	return f
}

// getModel reads a plan, state or config (its Get) into the model m.
func getModel[M any](ctx context.Context, get func(context.Context, any) diag.Diagnostics, m *M) diag.Diagnostics {
	var obj types.Object
	diags := get(ctx, &obj)
	if diags.HasError() {
		return diags
	}
	attrs := obj.Attributes()
	v := reflect.ValueOf(m).Elem()
	f := fieldsOf(v.Type())
	for i, name := range f.names {
		a, ok := attrs[name]
		dst := v.FieldByIndex(f.index[i])
		if !ok || !reflect.TypeOf(a).AssignableTo(dst.Type()) {
			diags.AddError("Provider Model Mismatch", fmt.Sprintf("attribute %q of type %T does not fit the model's %s", name, a, dst.Type()))
			continue
		}
		dst.Set(reflect.ValueOf(a))
	}
	return diags
}

// setModel writes the model m to a plan's or state's Raw, as an object of the
// schema's type (schemaType: its Schema.Type()). It checks each field's type
// against the schema's attribute and builds the object's terraform value
// itself: what types.ObjectValue, the framework's reflection and its Set
// (which builds the schema's type once more, to check it) would do, at half
// the cost.
func setModel[M any](ctx context.Context, raw *tftypes.Value, schemaType attr.Type, m *M) diag.Diagnostics {
	var diags diag.Diagnostics
	ot, ok := schemaType.(basetypes.ObjectType)
	if !ok {
		diags.AddError("Provider Model Mismatch", fmt.Sprintf("the schema's type is %T, not an object", schemaType))
		return diags
	}
	v := reflect.ValueOf(m).Elem()
	f := fieldsOf(v.Type())
	vals := make(map[string]tftypes.Value, len(f.names))
	for i, name := range f.names {
		a, ok := v.FieldByIndex(f.index[i]).Interface().(attr.Value)
		if !ok {
			diags.AddError("Provider Model Mismatch", fmt.Sprintf("model field for %q is not an attribute value", name))
			return diags
		}
		want, ok := ot.AttrTypes[name]
		if !ok {
			diags.AddError("Provider Model Mismatch", fmt.Sprintf("model field %q is not an attribute of the schema", name))
			return diags
		}
		if got := a.Type(ctx); !want.Equal(got) {
			diags.AddError("Provider Model Mismatch", fmt.Sprintf("model field %q is of type %s, the schema's attribute of type %s", name, got, want))
			return diags
		}
		tv, err := a.ToTerraformValue(ctx)
		if err != nil {
			diags.AddError("Provider Model Mismatch", fmt.Sprintf("model field %q: %s", name, err))
			return diags
		}
		vals[name] = tv
	}
	if len(vals) != len(ot.AttrTypes) {
		for name := range ot.AttrTypes {
			if _, ok := vals[name]; !ok {
				diags.AddError("Provider Model Mismatch", fmt.Sprintf("the model has no field for the schema's attribute %q", name))
			}
		}
		return diags
	}
	*raw = tftypes.NewValue(ot.TerraformType(ctx), vals)
	return diags
}
