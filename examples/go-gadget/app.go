// Roman numerals, written in Go: the Go SDK's example plugin.
// Build: gadget build examples/go-gadget
package app

import (
	"errors"
	"fmt"
	"strings"

	"wit_component/gadget"
)

var numerals = []struct {
	value  int
	symbol string
}{
	{1000, "M"}, {900, "CM"}, {500, "D"}, {400, "CD"}, {100, "C"}, {90, "XC"},
	{50, "L"}, {40, "XL"}, {10, "X"}, {9, "IX"}, {5, "V"}, {4, "IV"}, {1, "I"},
}

func roman(params map[string]any, ctx *gadget.Context) (gadget.Result, error) {
	n := int(params["number"].(float64))
	if n < 1 || n > 3999 {
		return gadget.Result{}, gadget.Invalid("number must be between 1 and 3999, got %d", n)
	}
	var out strings.Builder
	for _, numeral := range numerals {
		for n >= numeral.value {
			out.WriteString(numeral.symbol)
			n -= numeral.value
		}
	}
	ctx.Info("converted", map[string]any{"symbols": out.Len()})
	ctx.ReportCost(0.0003)
	result := gadget.Text(out.String())
	result.Details = map[string]any{"symbols": out.Len()}
	return result, nil
}

func workUntilCancelled(params map[string]any, ctx *gadget.Context) (gadget.Result, error) {
	for rounds := 1; ; rounds++ {
		if rounds%1000000 == 0 {
			ctx.Progress("still working")
		}
		if ctx.Cancelled() {
			ctx.Warn("stopping on the abort signal", nil)
			return gadget.Result{}, gadget.ErrCancelled
		}
	}
}

// httpStatus GETs a URL through the host (only the origins the operator
// grants) and returns the status and the start of the body.
func httpStatus(params map[string]any, ctx *gadget.Context) (gadget.Result, error) {
	url, _ := params["url"].(string)
	headers := map[string]string{}
	// A config value the operator grants ([plugins.go-roman] config = ...).
	if token, ok := gadget.Config("API_TOKEN"); ok {
		headers["authorization"] = "Bearer " + token
	}
	page, err := gadget.HTTPGet(url, headers)
	if err != nil {
		return gadget.Result{}, err
	}
	text := page.Text()
	if len(text) > 200 {
		text = text[:200]
	}
	return gadget.Text(fmt.Sprintf("%d %s", page.Status, text)), nil
}

// headline asks the host's LLM (only with the operator's grant) for a
// headline; the completion's cost is added to the call by the host.
func headline(params map[string]any, ctx *gadget.Context) (gadget.Result, error) {
	text, _ := params["text"].(string)
	answer, err := gadget.Complete([]gadget.Message{
		{Role: "system", Content: "Write one short headline for the text. Reply with the headline only."},
		{Role: "user", Content: text},
	}, gadget.CompletionOptions{MaxTokens: 40})
	if errors.Is(err, gadget.ErrLLMDeadline) {
		return gadget.Result{}, gadget.ErrCancelled
	}
	if err != nil {
		return gadget.Result{}, err
	}
	result := gadget.Text(answer.Text)
	result.Details = map[string]any{"model": answer.Model, "cost_usd": answer.Cost}
	return result, nil
}

func init() {
	gadget.Register(
		gadget.Def{
			Name:        "RomanNumeral",
			Label:       "Roman numeral",
			Description: "Writes a whole number from 1 to 3999 as a Roman numeral.",
			Schema:      `{"type":"object","properties":{"number":{"type":"integer","minimum":1,"maximum":3999,"description":"The number to write."}},"required":["number"]}`,
			Examples: []gadget.Example{
				{Params: `{"number": 1994}`, Output: "MCMXCIV"},
				{Params: `{"number": 4}`, Output: "IV", Comment: "Subtractive notation"},
			},
			Run: roman,
		},
		gadget.Def{
			Name:        "WorkUntilCancelled",
			Description: "Works until told to stop: shows how a Go gadget honours the abort signal.",
			Schema:      `{"type":"object","properties":{}}`,
			Run:         workUntilCancelled,
		},
		gadget.Def{
			Name:        "HttpStatus",
			Label:       "HTTP status",
			Description: "Fetches a URL (GET) and returns its HTTP status and the start of its body. Only the origins the operator grants can be reached.",
			Schema:      `{"type":"object","properties":{"url":` + gadget.URLParam + `},"required":["url"]}`,
			Run:         httpStatus,
		},
		gadget.Def{
			Name:        "Headline",
			Description: "Writes a short headline for a text, with the host's LLM.",
			Schema:      `{"type":"object","properties":{"text":{"type":"string","description":"The text to title."}},"required":["text"]}`,
			Run:         headline,
		},
	)
}
