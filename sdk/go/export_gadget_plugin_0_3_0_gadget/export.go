// Package export_gadget_plugin_0_3_0_gadget is the component's `gadget` export, as
// the generated bindings expect it: it links the app (whose init functions
// register its gadgets) and hands both functions to the SDK.
package export_gadget_plugin_0_3_0_gadget

import (
	_ "wit_component/app"
	"wit_component/gadget"
	"wit_component/gadget_plugin_0_3_0_types"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

func Specs() []gadget_plugin_0_3_0_types.GadgetSpec { return gadget.Specs() }

func Invoke(invocationID string, name string, params string) witTypes.Result[gadget_plugin_0_3_0_types.Outcome, gadget_plugin_0_3_0_types.GadgetError] {
	return gadget.Invoke(invocationID, name, params)
}
