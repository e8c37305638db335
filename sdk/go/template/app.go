// __GADGET__: a gadget for gadget-host, in Go.
// Build: gadget build .    Check: gadget check .
package app

import (
	"fmt"
	"strings"

	"wit_component/gadget"
)

func init() {
	gadget.Register(gadget.Def{
		Name:        "__GADGET__",
		Description: "Counts the words of a text. Describe here, for the model, what the gadget does.",
		Schema:      `{"type":"object","properties":{"text":{"type":"string","description":"The text to count the words of."}},"required":["text"]}`,
		Examples:    []gadget.Example{{Params: `{"text": "hello world"}`, Output: "2 words"}},
		Run: func(params map[string]any, ctx *gadget.Context) (gadget.Result, error) {
			words := len(strings.Fields(params["text"].(string)))
			if words == 0 {
				return gadget.Result{}, gadget.Invalid("text has no words")
			}
			ctx.Info("counted", map[string]any{"words": words})
			return gadget.Text(fmt.Sprintf("%d words", words)), nil
		},
	})
}
