package gadget

// The resources and prompts a component serves (the catalog export of
// contract 0.3.0). The lists are read once, at load; each read, prompt and
// completion runs in a fresh instance under the plugin's grants, as a call
// does. Register them once, from init:
//
//	func init() {
//		gadget.Serve(gadget.Catalog{
//			Resources: []gadget.Resource{{URI: "notes://index", Name: "index", MimeType: "text/plain"}},
//			Read: func(uri string, ctx *gadget.Context) ([]gadget.Contents, error) {
//				if uri != "notes://index" {
//					return nil, gadget.ErrNotFound
//				}
//				return []gadget.Contents{{URI: uri, MimeType: "text/plain", Text: "a, b"}}, nil
//			},
//		})
//	}

import (
	"errors"

	"wit_component/gadget_plugin_0_3_0_catalog"
	"wit_component/gadget_plugin_0_3_0_types"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

// Resource is a resource with a fixed URI.
type Resource struct {
	URI, Name, Title, Description, MimeType string
	Size                                    int64 // bytes; negative or 0: unknown
}

// Template is a family of resources: a URI template with simple
// expressions ("notes://{name}"). Read gets the URIs that match it.
type Template struct {
	URITemplate, Name, Title, Description, MimeType string
}

// Argument is one argument of a prompt; Examples are offered when a client
// completes it.
type Argument struct {
	Name, Description string
	Required          bool
	Examples          []string
}

// Prompt is a prompt the component renders.
type Prompt struct {
	Name, Title, Description string
	Arguments                []Argument
}

// Contents is what a read gives back: Text, or Blob when Text is "".
type Contents struct {
	URI, MimeType, Text string
	Blob                []byte
}

// Message is one message of a rendered prompt: "user" or "assistant" says
// Part (a TextPart, an Image, ...).
type PromptMessage struct {
	Role string
	Part Part
}

// Rendered is a rendered prompt.
type Rendered struct {
	Description string
	Messages    []PromptMessage
}

// ErrNotFound is what Read returns for a URI it does not serve.
var ErrNotFound = errors.New("no resource has this URI")

// Catalog is everything a component serves beside its gadgets.
type Catalog struct {
	Resources []Resource
	Templates []Template
	Prompts   []Prompt
	// Read reads a resource (one of Resources, or a URI a template matches).
	Read func(uri string, ctx *Context) ([]Contents, error)
	// Render renders a prompt; the host has checked its arguments (every
	// required one there, none unknown).
	Render func(name string, arguments map[string]string, ctx *Context) (Rendered, error)
	// Complete gives values for an argument of a prompt (isPrompt) or of a
	// template (reference is its URI template) that match value, best
	// first. nil: the examples are all a client is offered.
	Complete func(isPrompt bool, reference, argument, value string) []string
}

var served Catalog

// Serve registers the component's catalog (call it once, from init).
func Serve(catalog Catalog) { served = catalog }

// CatalogResources is the catalog export's `resources`.
func CatalogResources() []gadget_plugin_0_3_0_catalog.Resource {
	out := make([]gadget_plugin_0_3_0_catalog.Resource, 0, len(served.Resources))
	for _, r := range served.Resources {
		size := witTypes.None[uint64]()
		if r.Size > 0 {
			size = witTypes.Some(uint64(r.Size))
		}
		out = append(out, gadget_plugin_0_3_0_catalog.Resource{
			Uri: r.URI, Name: r.Name, Title: option(r.Title), Description: option(r.Description),
			MimeType: option(r.MimeType), Size: size,
		})
	}
	return out
}

// CatalogTemplates is the catalog export's `resource-templates`.
func CatalogTemplates() []gadget_plugin_0_3_0_catalog.ResourceTemplate {
	out := make([]gadget_plugin_0_3_0_catalog.ResourceTemplate, 0, len(served.Templates))
	for _, t := range served.Templates {
		out = append(out, gadget_plugin_0_3_0_catalog.ResourceTemplate{
			UriTemplate: t.URITemplate, Name: t.Name, Title: option(t.Title),
			Description: option(t.Description), MimeType: option(t.MimeType),
		})
	}
	return out
}

// CatalogPrompts is the catalog export's `prompts`.
func CatalogPrompts() []gadget_plugin_0_3_0_catalog.Prompt {
	out := make([]gadget_plugin_0_3_0_catalog.Prompt, 0, len(served.Prompts))
	for _, p := range served.Prompts {
		arguments := make([]gadget_plugin_0_3_0_catalog.PromptArgument, 0, len(p.Arguments))
		for _, a := range p.Arguments {
			examples := a.Examples
			if examples == nil {
				examples = []string{}
			}
			arguments = append(arguments, gadget_plugin_0_3_0_catalog.PromptArgument{
				Name: a.Name, Description: option(a.Description), Required: a.Required, Examples: examples,
			})
		}
		out = append(out, gadget_plugin_0_3_0_catalog.Prompt{
			Name: p.Name, Title: option(p.Title), Description: option(p.Description), Arguments: arguments,
		})
	}
	return out
}

type readResult = witTypes.Result[[]gadget_plugin_0_3_0_types.ResourceContents, gadget_plugin_0_3_0_catalog.ReadError]

// CatalogRead is the catalog export's `read-resource`.
func CatalogRead(uri string) (result readResult) {
	notFound := witTypes.Err[[]gadget_plugin_0_3_0_types.ResourceContents](gadget_plugin_0_3_0_catalog.MakeReadErrorNotFound())
	if served.Read == nil {
		return notFound
	}
	defer func() {
		if p := recover(); p != nil {
			result = witTypes.Err[[]gadget_plugin_0_3_0_types.ResourceContents](gadget_plugin_0_3_0_catalog.MakeReadErrorFailed("read panicked"))
		}
	}()
	read, err := served.Read(uri, &Context{})
	switch {
	case errors.Is(err, ErrNotFound):
		return notFound
	case err != nil:
		return witTypes.Err[[]gadget_plugin_0_3_0_types.ResourceContents](gadget_plugin_0_3_0_catalog.MakeReadErrorFailed(err.Error()))
	}
	out := make([]gadget_plugin_0_3_0_types.ResourceContents, 0, len(read))
	for _, c := range read {
		body := gadget_plugin_0_3_0_types.MakeResourceBodyText(c.Text)
		if c.Text == "" && c.Blob != nil {
			body = gadget_plugin_0_3_0_types.MakeResourceBodyBlob(c.Blob)
		}
		out = append(out, contents(c.URI, c.MimeType, body))
	}
	return witTypes.Ok[[]gadget_plugin_0_3_0_types.ResourceContents, gadget_plugin_0_3_0_catalog.ReadError](out)
}

type promptResult = witTypes.Result[gadget_plugin_0_3_0_catalog.PromptResult, gadget_plugin_0_3_0_types.GadgetError]

// CatalogPrompt is the catalog export's `get-prompt`.
func CatalogPrompt(name string, arguments []witTypes.Tuple2[string, string]) (result promptResult) {
	failed := func(message string) promptResult {
		return witTypes.Err[gadget_plugin_0_3_0_catalog.PromptResult](gadget_plugin_0_3_0_types.MakeGadgetErrorFailed(message))
	}
	if served.Render == nil {
		return failed("this component serves no prompt " + name)
	}
	defer func() {
		if p := recover(); p != nil {
			result = failed("prompt " + name + " panicked")
		}
	}()
	values := make(map[string]string, len(arguments))
	for _, argument := range arguments {
		values[argument.F0] = argument.F1
	}
	rendered, err := served.Render(name, values, &Context{})
	if err != nil {
		var invalid InvalidArguments
		if errors.As(err, &invalid) {
			return witTypes.Err[gadget_plugin_0_3_0_catalog.PromptResult](gadget_plugin_0_3_0_types.MakeGadgetErrorInvalidArguments(invalid.Message))
		}
		return failed(err.Error())
	}
	messages := make([]gadget_plugin_0_3_0_catalog.PromptMessage, 0, len(rendered.Messages))
	for _, m := range rendered.Messages {
		role := gadget_plugin_0_3_0_catalog.Speaker_User
		if m.Role == "assistant" {
			role = gadget_plugin_0_3_0_catalog.Speaker_Assistant
		}
		messages = append(messages, gadget_plugin_0_3_0_catalog.PromptMessage{Role: role, Content: m.Part.content})
	}
	return witTypes.Ok[gadget_plugin_0_3_0_catalog.PromptResult, gadget_plugin_0_3_0_types.GadgetError](
		gadget_plugin_0_3_0_catalog.PromptResult{Description: option(rendered.Description), Messages: messages})
}

// The most completion values handed back (the host keeps 100).
const maxCompletions = 100

// CatalogComplete is the catalog export's `complete`.
func CatalogComplete(reference gadget_plugin_0_3_0_catalog.CompletionRef, argument, value string) []string {
	if served.Complete == nil {
		return []string{}
	}
	isPrompt := reference.Tag() == gadget_plugin_0_3_0_catalog.CompletionRef_Prompt
	name := ""
	if isPrompt {
		name = reference.Prompt()
	} else {
		name = reference.Resource()
	}
	values := served.Complete(isPrompt, name, argument, value)
	if len(values) > maxCompletions {
		values = values[:maxCompletions]
	}
	if values == nil {
		values = []string{}
	}
	return values
}
