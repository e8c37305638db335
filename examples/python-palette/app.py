"""Contract 0.3.0 in Python, one feature per item (the Rust twin is
examples/palette):

- ``PySwatch`` asks twice (a form, then a text question) and returns an
  image (a PNG it draws) with a text part and structured JSON;
- ``PyBlend`` reports numeric progress while it works;
- the catalog serves the colours as a resource, every swatch through a URI
  template (``pypalette://swatch/{colour}``), and a prompt whose argument
  completes from its examples.

Build and try it (the person at the terminal answers, or ``--answers``):

    gadget build examples/python-palette
    gadget --plugins examples/python-palette call PySwatch --params '{}'
"""

import json
import struct
import zlib

from gadget_sdk import (
    Argument,
    Cancelled,
    Embedded,
    Image,
    InvalidArguments,
    Prompt,
    Question,
    Resource,
    Result,
    Template,
    export,
    gadget,
)

COLOURS = {
    "red": (0xE0, 0x1B, 0x24),
    "green": (0x2E, 0xC2, 0x7E),
    "blue": (0x1C, 0x71, 0xD8),
    "yellow": (0xF6, 0xD3, 0x2D),
    "black": (0, 0, 0),
    "white": (0xFF, 0xFF, 0xFF),
}

# The largest swatch, in pixels a side: big enough to see, small enough that
# the result stays far under the host's result limit.
MAX_SIDE_PX = 128


def png(side: int, rgb) -> bytes:
    """A side x side square of one colour, as an 8-bit RGB PNG."""
    row = b"\x00" + bytes(rgb) * side
    raw = row * side

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


@gadget(
    description="Asks the person which colour and how big, then returns a square swatch of it as a PNG image.",
    schema={"type": "object", "properties": {}},
)
def PySwatch(params: dict, ctx) -> Result:
    # Ask before acting: over stateless HTTP the gadget runs again from the
    # start with the answers so far.
    first = ctx.ask(
        colour=Question.form(
            "Which colour should the swatch be?",
            {
                "type": "object",
                "properties": {"colour": {"type": "string", "enum": list(COLOURS)}},
                "required": ["colour"],
            },
        )
    )
    name = (first["colour"] or {}).get("colour")
    if name is None:
        raise RuntimeError("no colour was chosen")
    if name not in COLOURS:
        raise InvalidArguments(f"unknown colour {name!r}")
    second = ctx.ask(side=Question.text(f"How many pixels a side (1 to {MAX_SIDE_PX})?"))
    try:
        side = int((second["side"] or "").strip())
    except ValueError:
        side = 0
    if not 1 <= side <= MAX_SIDE_PX:
        raise InvalidArguments(f"the side must be a whole number from 1 to {MAX_SIDE_PX}")
    ctx.info(f"drew a {side}x{side} {name} swatch")
    return Result(
        text=f"A {side}x{side} {name} swatch.",
        parts=[Image(png(side, COLOURS[name]), "image/png")],
        structured={"colour": name, "side": side},
    )


@gadget(
    description="Blends one named colour into another in even steps and lists the hex codes.",
    schema={
        "type": "object",
        "properties": {
            "from": {"type": "string", "description": "The first colour's name."},
            "to": {"type": "string", "description": "The second colour's name."},
            "steps": {"type": "integer", "description": "How many steps (2 to 50).", "default": 5},
        },
        "required": ["from", "to"],
    },
    examples=[({"from": "black", "to": "white", "steps": 3}, "#000000 #7f7f7f #ffffff")],
)
def PyBlend(params: dict, ctx) -> str:
    for key in ("from", "to"):
        if params[key] not in COLOURS:
            raise InvalidArguments(f"unknown colour {params[key]!r}; known: {', '.join(COLOURS)}")
    steps = params.get("steps", 5)
    if not 2 <= steps <= 50:
        raise InvalidArguments("steps must be from 2 to 50")
    start, end = COLOURS[params["from"]], COLOURS[params["to"]]
    codes = []
    for step in range(steps):
        if ctx.cancelled():
            raise Cancelled()
        mix = [int(a + (b - a) * step / (steps - 1)) for a, b in zip(start, end)]
        codes.append("#%02x%02x%02x" % tuple(mix))
        ctx.report_progress(step + 1, steps, f"step {step + 1} of {steps}")
    return " ".join(codes)


def read_colours(uri, ctx):
    return Embedded(uri, text=json.dumps({n: "#%02x%02x%02x" % rgb for n, rgb in COLOURS.items()}),
                    mime_type="application/json")


def read_swatch(uri, variables, ctx):
    rgb = COLOURS.get(variables["colour"])
    return None if rgb is None else png(16, rgb)


def paint(arguments, ctx):
    colour = arguments["colour"]
    if colour not in COLOURS:
        raise InvalidArguments(f"unknown colour {colour!r}")
    return [
        ("user", f"Describe, in two sentences, a quiet room painted {colour}."),
        ("user", Image(png(16, COLOURS[colour]))),
    ]


Gadget = export(
    PySwatch,
    PyBlend,
    resources=[Resource("pypalette://colours", "colours", read_colours,
                        description="Every colour this plugin knows, with its hex code",
                        mime_type="application/json")],
    templates=[Template("pypalette://swatch/{colour}", "swatch", read_swatch,
                        description="A 16x16 PNG swatch of a named colour", mime_type="image/png")],
    prompts=[Prompt("py-paint", paint, description="Asks the model to describe a room painted in a colour",
                    arguments=[Argument("colour", "The colour's name", required=True, examples=list(COLOURS))])],
)
