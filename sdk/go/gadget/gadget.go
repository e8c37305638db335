// Package gadget is the Go SDK for gadget-host gadgets (contract
// gadget:plugin@0.3.0: results in parts, asking and carrying on, numeric
// progress, resources and prompts; see content.go and catalog.go).
//
// A plugin is a directory of Go files in package app that register their
// gadgets when the component starts:
//
//	package app
//
//	import (
//		"fmt"
//		"strings"
//
//		"wit_component/gadget"
//	)
//
//	func init() {
//		gadget.Register(gadget.Def{
//			Name:        "WordCount",
//			Description: "Counts the words of a text.",
//			Schema:      `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`,
//			Examples:    []gadget.Example{{Params: `{"text": "hello world"}`, Output: "2 words"}},
//			Run: func(params map[string]any, ctx *gadget.Context) (gadget.Result, error) {
//				words := len(strings.Fields(params["text"].(string)))
//				if words == 0 {
//					return gadget.Result{}, gadget.Invalid("text has no words")
//				}
//				ctx.Info("counted", map[string]any{"words": words})
//				return gadget.Text(fmt.Sprintf("%d words", words)), nil
//			},
//		})
//	}
//
// `gadget build DIR` assembles the Go module (this package, the bindings
// wit-bindgen go generated from the WIT, the app) and builds the component.
// The host validates parameters against the schema (after filling in
// defaults) before Run, so a gadget can trust their shape.
package gadget

import (
	"encoding/json"
	"errors"
	"fmt"

	"wit_component/gadget_plugin_0_3_0_host"
	"wit_component/gadget_plugin_0_3_0_types"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

// Example is one example call, shown to the model and checked at load.
type Example struct {
	Params  string // a JSON object
	Output  string // what the gadget returns ("" for none)
	Comment string // what the example shows ("" for none)
}

// URLParam and PathParam are the schemas of a parameter that is a URL or
// a file path, for a Def's Schema: the format tells the host what the
// value means, so the operator's rules match it by meaning (HTTP://x is
// http://x; /out/./a is /out/a). In a schema:
// `{"type":"object","properties":{"url":` + gadget.URLParam + `}}`.
const (
	URLParam  = `{"type":"string","format":"uri"}`
	PathParam = `{"type":"string","format":"path"}`
)

// Def declares one gadget.
type Def struct {
	Name          string // letters, digits and '_'
	Description   string // what the model reads
	Schema        string // JSON Schema of the parameters ("" for none)
	Examples      []Example
	Label         string // for people ("" for none)
	TimeoutMs     uint32 // 0: the host's default
	Exclusive     bool   // runs alone
	MaxConcurrent uint32 // 0: no limit
	Run           func(params map[string]any, ctx *Context) (Result, error)
}

type outcomeKind int

const (
	kindResult outcomeKind = iota
	kindFinish
	kindAskHuman
)

// Result is how a call ended well: a result, a finish or a question.
type Result struct {
	Text string
	// Parts after the text (images, sounds, resources, links), in order;
	// the host's result limit covers them all.
	Parts []Part
	// The result as JSON too (MCP's structuredContent); nil for none.
	Structured any
	Cost       float64 // USD returned with the result (added to reported costs)
	Details    any     // for people, serialised as JSON; nil for none
	kind       outcomeKind
}

// Text is a plain result for the model.
func Text(text string) Result { return Result{Text: text} }

// Finish says the task is complete: the agent loop ends after this response.
func Finish(text string) Result { return Result{Text: text, kind: kindFinish} }

// AskHuman asks a person; the answer becomes the call's result (asked with
// the ask import; to carry on with the answer, use ctx.AskText).
func AskHuman(question string) Result { return Result{Text: question, kind: kindAskHuman} }

// InvalidArguments is an error saying the parameters are unusable.
type InvalidArguments struct{ Message string }

func (e InvalidArguments) Error() string { return e.Message }

// Invalid makes an InvalidArguments error, printf-style.
func Invalid(format string, args ...any) error {
	return InvalidArguments{Message: fmt.Sprintf(format, args...)}
}

// ErrCancelled is what a gadget returns after the abort signal (ctx.Cancelled()).
var ErrCancelled = errors.New("cancelled")

// Context is what a gadget can ask of the host during a call.
type Context struct {
	InvocationID string
}

func (c *Context) log(level gadget_plugin_0_3_0_types.Level, message string, fields map[string]any) {
	text := ""
	if fields != nil {
		if b, err := json.Marshal(fields); err == nil {
			text = string(b)
		}
	}
	gadget_plugin_0_3_0_host.Log(level, message, text)
}

// Debug, Info, Warn and Error write log entries for people (never shown to
// the model); fields may be nil.
func (c *Context) Debug(message string, fields map[string]any) { c.log(1, message, fields) }
func (c *Context) Info(message string, fields map[string]any)  { c.log(2, message, fields) }
func (c *Context) Warn(message string, fields map[string]any)  { c.log(3, message, fields) }
func (c *Context) Error(message string, fields map[string]any) { c.log(4, message, fields) }

// ReportCost reports a cost in USD; kept even if the call later fails.
func (c *Context) ReportCost(usd float64) { gadget_plugin_0_3_0_host.ReportCost(usd) }

// Progress is a short status line for people.
func (c *Context) Progress(message string) { gadget_plugin_0_3_0_host.Progress(message) }

// Update is a partial result for live display (never shown to the model).
func (c *Context) Update(partial string) {
	gadget_plugin_0_3_0_host.Update(partial, witTypes.None[string]())
}

// Cancelled is true once the deadline has passed or the run was cancelled:
// check it in long loops and return ErrCancelled.
func (c *Context) Cancelled() bool { return gadget_plugin_0_3_0_host.Cancelled() }

// TimeLeftMs is the time until the call's deadline.
func (c *Context) TimeLeftMs() uint64 { return gadget_plugin_0_3_0_host.CallInfo().TimeLeftMs }

var registry []Def

// Register adds gadgets to the component (call it from init).
func Register(defs ...Def) {
	for _, def := range defs {
		for _, other := range registry {
			if other.Name == def.Name {
				panic(fmt.Sprintf("gadget %q is registered twice", def.Name))
			}
		}
		registry = append(registry, def)
	}
}

func option[T comparable](value T) witTypes.Option[T] {
	var zero T
	if value == zero {
		return witTypes.None[T]()
	}
	return witTypes.Some(value)
}

// Specs lists the registered gadgets (the component's `specs` export).
func Specs() []gadget_plugin_0_3_0_types.GadgetSpec {
	specs := make([]gadget_plugin_0_3_0_types.GadgetSpec, 0, len(registry))
	for _, def := range registry {
		examples := make([]gadget_plugin_0_3_0_types.Example, 0, len(def.Examples))
		for _, ex := range def.Examples {
			examples = append(examples, gadget_plugin_0_3_0_types.Example{
				Params:  ex.Params,
				Output:  option(ex.Output),
				Comment: option(ex.Comment),
			})
		}
		specs = append(specs, gadget_plugin_0_3_0_types.GadgetSpec{
			Name:             def.Name,
			Label:            option(def.Label),
			Description:      def.Description,
			ParametersSchema: def.Schema,
			Examples:         examples,
			TimeoutMs:        option(def.TimeoutMs),
			Exclusive:        def.Exclusive,
			MaxConcurrent:    option(def.MaxConcurrent),
		})
	}
	return specs
}

type (
	outcome  = gadget_plugin_0_3_0_types.Outcome
	failure  = gadget_plugin_0_3_0_types.GadgetError
	response = witTypes.Result[outcome, failure]
)

func fail(err failure) response { return witTypes.Err[outcome, failure](err) }

// Invoke runs one call (the component's `invoke` export).
func Invoke(invocationID string, name string, params string) (result response) {
	var def *Def
	for i := range registry {
		if registry[i].Name == name {
			def = &registry[i]
		}
	}
	if def == nil {
		return fail(gadget_plugin_0_3_0_types.MakeGadgetErrorFailed(fmt.Sprintf("this component has no gadget %q", name)))
	}
	var decoded map[string]any
	if params == "" {
		params = "{}"
	}
	if err := json.Unmarshal([]byte(params), &decoded); err != nil {
		return fail(gadget_plugin_0_3_0_types.MakeGadgetErrorFailed("parameters are not a JSON object: " + err.Error()))
	}
	// A panic is a failure the model sees, not a crash of the instance.
	defer func() {
		if p := recover(); p != nil {
			result = fail(gadget_plugin_0_3_0_types.MakeGadgetErrorFailed(fmt.Sprintf("gadget %q panicked: %v", name, p)))
		}
	}()
	value, err := def.Run(decoded, &Context{InvocationID: invocationID})
	if err != nil {
		var invalid InvalidArguments
		switch {
		case errors.As(err, &invalid):
			return fail(gadget_plugin_0_3_0_types.MakeGadgetErrorInvalidArguments(invalid.Message))
		case errors.Is(err, ErrCancelled):
			return fail(gadget_plugin_0_3_0_types.MakeGadgetErrorCancelled())
		default:
			return fail(gadget_plugin_0_3_0_types.MakeGadgetErrorFailed(err.Error()))
		}
	}
	if value.kind == kindAskHuman {
		answer, err := askText(value.Text)
		switch {
		case errors.Is(err, ErrCancelled):
			return fail(gadget_plugin_0_3_0_types.MakeGadgetErrorCancelled())
		case err != nil:
			return fail(gadget_plugin_0_3_0_types.MakeGadgetErrorFailed("the question could not be asked: " + err.Error()))
		}
		value = Text(answer)
	}
	callResult := gadget_plugin_0_3_0_types.CallResult{
		Content:    resultContents(value.Text, value.Parts),
		Structured: witTypes.None[string](),
		Cost:       option(value.Cost),
		Details:    witTypes.None[string](),
	}
	if value.Structured != nil {
		if b, err := json.Marshal(value.Structured); err == nil {
			callResult.Structured = witTypes.Some(string(b))
		}
	}
	if value.Details != nil {
		if b, err := json.Marshal(value.Details); err == nil {
			callResult.Details = witTypes.Some(string(b))
		}
	}
	if value.kind == kindFinish {
		return witTypes.Ok[outcome, failure](gadget_plugin_0_3_0_types.MakeOutcomeFinish(callResult))
	}
	return witTypes.Ok[outcome, failure](gadget_plugin_0_3_0_types.MakeOutcomeResult(callResult))
}
