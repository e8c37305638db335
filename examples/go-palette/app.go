// Contract 0.3.0 in Go, one feature per item (the Rust, Python and C twins
// are examples/palette, examples/python-palette and examples/c-palette):
//
//   - GoSwatch asks twice (a form, then a text question) and returns an
//     image (a PNG it draws) with a text part and structured JSON;
//   - GoBlend reports numeric progress while it works;
//   - the catalog serves the colours as a resource, every swatch through a
//     URI template (gopalette://swatch/{colour}), and a prompt whose
//     argument completes from its examples.
//
// Build and try it (the person at the terminal answers, or --answers):
//
//	gadget build examples/go-palette
//	gadget --plugins examples/go-palette call GoSwatch --params '{}'
package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strconv"
	"strings"

	"wit_component/gadget"
)

var names = []string{"red", "green", "blue", "yellow", "black", "white"}

var colours = map[string]color.RGBA{
	"red":    {0xE0, 0x1B, 0x24, 0xFF},
	"green":  {0x2E, 0xC2, 0x7E, 0xFF},
	"blue":   {0x1C, 0x71, 0xD8, 0xFF},
	"yellow": {0xF6, 0xD3, 0x2D, 0xFF},
	"black":  {0, 0, 0, 0xFF},
	"white":  {0xFF, 0xFF, 0xFF, 0xFF},
}

// The largest swatch, in pixels a side: big enough to see, small enough
// that the result stays far under the host's result limit.
const maxSidePx = 128

// swatchPNG is a side x side square of one colour, as a PNG.
func swatchPNG(side int, c color.RGBA) []byte {
	img := image.NewRGBA(image.Rect(0, 0, side, side))
	for y := 0; y < side; y++ {
		for x := 0; x < side; x++ {
			img.Set(x, y, c)
		}
	}
	var out bytes.Buffer
	if err := png.Encode(&out, img); err != nil {
		panic(err)
	}
	return out.Bytes()
}

func hex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

func swatch(params map[string]any, ctx *gadget.Context) (gadget.Result, error) {
	// Ask before acting: over stateless HTTP the gadget runs again from the
	// start with the answers so far.
	schema, _ := json.Marshal(map[string]any{
		"type":       "object",
		"properties": map[string]any{"colour": map[string]any{"type": "string", "enum": names}},
		"required":   []string{"colour"},
	})
	first, err := ctx.Ask(gadget.FormQuestion("colour", "Which colour should the swatch be?", string(schema)))
	if err != nil {
		return gadget.Result{}, err
	}
	name, _ := first["colour"].Form["colour"].(string)
	if name == "" {
		return gadget.Result{}, fmt.Errorf("no colour was chosen")
	}
	c, known := colours[name]
	if !known {
		return gadget.Result{}, gadget.Invalid("unknown colour %q", name)
	}
	answer, err := ctx.AskText(fmt.Sprintf("How many pixels a side (1 to %d)?", maxSidePx))
	if err != nil {
		return gadget.Result{}, err
	}
	side, _ := strconv.Atoi(strings.TrimSpace(answer))
	if side < 1 || side > maxSidePx {
		return gadget.Result{}, gadget.Invalid("the side must be a whole number from 1 to %d", maxSidePx)
	}
	ctx.Info("drew a swatch", map[string]any{"colour": name, "side": side})
	return gadget.Result{
		Text:       fmt.Sprintf("A %dx%d %s swatch.", side, side, name),
		Parts:      []gadget.Part{gadget.Image("image/png", swatchPNG(side, c))},
		Structured: map[string]any{"colour": name, "side": side},
	}, nil
}

func blend(params map[string]any, ctx *gadget.Context) (gadget.Result, error) {
	from, okFrom := colours[params["from"].(string)]
	to, okTo := colours[params["to"].(string)]
	if !okFrom || !okTo {
		return gadget.Result{}, gadget.Invalid("unknown colour; known: %s", strings.Join(names, ", "))
	}
	steps := 5
	if s, ok := params["steps"].(float64); ok {
		steps = int(s)
	}
	if steps < 2 || steps > 50 {
		return gadget.Result{}, gadget.Invalid("steps must be from 2 to 50")
	}
	codes := make([]string, 0, steps)
	mix := func(a, b uint8, step int) uint8 { return uint8(int(a) + (int(b)-int(a))*step/(steps-1)) }
	for step := 0; step < steps; step++ {
		if ctx.Cancelled() {
			return gadget.Result{}, gadget.ErrCancelled
		}
		codes = append(codes, hex(color.RGBA{mix(from.R, to.R, step), mix(from.G, to.G, step), mix(from.B, to.B, step), 0xFF}))
		ctx.ReportProgress(float64(step+1), float64(steps), fmt.Sprintf("step %d of %d", step+1, steps))
	}
	return gadget.Text(strings.Join(codes, " ")), nil
}

func read(uri string, ctx *gadget.Context) ([]gadget.Contents, error) {
	if uri == "gopalette://colours" {
		codes := map[string]string{}
		for name, c := range colours {
			codes[name] = hex(c)
		}
		text, _ := json.Marshal(codes)
		return []gadget.Contents{{URI: uri, MimeType: "application/json", Text: string(text)}}, nil
	}
	if name, ok := strings.CutPrefix(uri, "gopalette://swatch/"); ok {
		if c, known := colours[name]; known {
			return []gadget.Contents{{URI: uri, MimeType: "image/png", Blob: swatchPNG(16, c)}}, nil
		}
	}
	return nil, gadget.ErrNotFound
}

func paint(name string, arguments map[string]string, ctx *gadget.Context) (gadget.Rendered, error) {
	c, known := colours[arguments["colour"]]
	if !known {
		return gadget.Rendered{}, gadget.Invalid("unknown colour %q", arguments["colour"])
	}
	return gadget.Rendered{Messages: []gadget.PromptMessage{
		{Role: "user", Part: gadget.TextPart(fmt.Sprintf("Describe, in two sentences, a quiet room painted %s.", arguments["colour"]))},
		{Role: "user", Part: gadget.Image("image/png", swatchPNG(16, c))},
	}}, nil
}

func init() {
	gadget.Register(
		gadget.Def{
			Name:        "GoSwatch",
			Description: "Asks the person which colour and how big, then returns a square swatch of it as a PNG image.",
			Schema:      `{"type":"object","properties":{}}`,
			Run:         swatch,
		},
		gadget.Def{
			Name:        "GoBlend",
			Description: "Blends one named colour into another in even steps and lists the hex codes.",
			Schema: `{"type":"object","properties":{` +
				`"from":{"type":"string","description":"The first colour's name."},` +
				`"to":{"type":"string","description":"The second colour's name."},` +
				`"steps":{"type":"integer","description":"How many steps (2 to 50).","default":5}},` +
				`"required":["from","to"]}`,
			Examples: []gadget.Example{{Params: `{"from": "black", "to": "white", "steps": 3}`, Output: "#000000 #7f7f7f #ffffff"}},
			Run:      blend,
		},
	)
	gadget.Serve(gadget.Catalog{
		Resources: []gadget.Resource{{URI: "gopalette://colours", Name: "colours",
			Description: "Every colour this plugin knows, with its hex code", MimeType: "application/json"}},
		Templates: []gadget.Template{{URITemplate: "gopalette://swatch/{colour}", Name: "swatch",
			Description: "A 16x16 PNG swatch of a named colour", MimeType: "image/png"}},
		Prompts: []gadget.Prompt{{Name: "go-paint", Description: "Asks the model to describe a room painted in a colour",
			Arguments: []gadget.Argument{{Name: "colour", Description: "The colour's name", Required: true, Examples: names}}}},
		Read:   read,
		Render: paint,
	})
}
