// Package export_gadget_plugin_0_3_0_catalog is the component's `catalog`
// export, as the generated bindings expect it: it hands each function to
// the SDK (empty lists when the app serves nothing).
package export_gadget_plugin_0_3_0_catalog

import (
	"wit_component/gadget"
	"wit_component/gadget_plugin_0_3_0_catalog"
	"wit_component/gadget_plugin_0_3_0_types"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

func Resources() []gadget_plugin_0_3_0_catalog.Resource { return gadget.CatalogResources() }

func ResourceTemplates() []gadget_plugin_0_3_0_catalog.ResourceTemplate {
	return gadget.CatalogTemplates()
}

func Prompts() []gadget_plugin_0_3_0_catalog.Prompt { return gadget.CatalogPrompts() }

func ReadResource(uri string) witTypes.Result[[]gadget_plugin_0_3_0_types.ResourceContents, gadget_plugin_0_3_0_catalog.ReadError] {
	return gadget.CatalogRead(uri)
}

func GetPrompt(name string, arguments []witTypes.Tuple2[string, string]) witTypes.Result[gadget_plugin_0_3_0_catalog.PromptResult, gadget_plugin_0_3_0_types.GadgetError] {
	return gadget.CatalogPrompt(name, arguments)
}

func Complete(reference gadget_plugin_0_3_0_catalog.CompletionRef, argument string, value string, context []witTypes.Tuple2[string, string]) []string {
	return gadget.CatalogComplete(reference, argument, value)
}
