//! Contract 0.3.0 in Rust, one feature per item:
//!
//! - `Swatch` **asks twice** (a form, then a text question) and returns an
//!   **image** (a PNG it draws) with a text part and structured JSON;
//! - `Blend` reports **numeric progress** while it works;
//! - the **catalog** serves the colours as a resource, every swatch through
//!   a URI template (`palette://swatch/{colour}`), and a prompt whose
//!   argument completes from its examples.
//!
//! Build and try it (the person at the terminal answers the two questions,
//! or `--answers` does):
//!
//! ```text
//! cargo build -p example-palette --target wasm32-wasip2 --profile guest
//! cp target/wasm32-wasip2/guest/example_palette.wasm examples/palette/palette.wasm
//! gadget --plugins examples/palette call Swatch --params '{}'
//! ```

use gadget_sdk::ask::Question;
use gadget_sdk::catalog::{Argument, Prompt, ReadError, Reference, Rendered, Resource, Template};
use gadget_sdk::{
    Catalog, Contents, Context, Example, Gadget, GadgetError, NoParams, Outcome, Part, Value, json,
};
use schemars::JsonSchema;
use serde::Deserialize;

/// The colours this plugin knows, by name.
const COLOURS: &[(&str, [u8; 3])] = &[
    ("red", [0xe0, 0x1b, 0x24]),
    ("green", [0x2e, 0xc2, 0x7e]),
    ("blue", [0x1c, 0x71, 0xd8]),
    ("yellow", [0xf6, 0xd3, 0x2d]),
    ("black", [0, 0, 0]),
    ("white", [0xff, 0xff, 0xff]),
];

/// The largest swatch, in pixels a side: big enough to see, small enough
/// that its PNG (stored, not compressed) stays under 50 KiB.
const MAX_SIDE_PX: u32 = 128;

fn colour(name: &str) -> Option<[u8; 3]> {
    COLOURS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name.trim()))
        .map(|(_, rgb)| *rgb)
}

fn names() -> Vec<&'static str> {
    COLOURS.iter().map(|(n, _)| *n).collect()
}

struct Swatch;

impl Gadget for Swatch {
    type Params = NoParams;
    const NAME: &'static str = "Swatch";
    const DESCRIPTION: &'static str = "Asks the person which colour and how big, then returns a square swatch of it as a PNG image.";

    fn invoke(_: NoParams, ctx: &Context) -> Result<Outcome, GadgetError> {
        // Ask before acting: over stateless HTTP the gadget runs again from
        // the start with the answers so far, so everything before the last
        // ask must be the same each time (it is: nothing happens yet).
        let first = ctx.ask([Question::form(
            "colour",
            "Which colour should the swatch be?",
            json!({
                "type": "object",
                "properties": { "colour": { "type": "string", "enum": names() } },
                "required": ["colour"],
            }),
        )])?;
        let Some(name) = first.form("colour").and_then(|f| f["colour"].as_str()) else {
            return Err(GadgetError::failed("no colour was chosen"));
        };
        let rgb = colour(name)
            .ok_or_else(|| GadgetError::invalid_arguments(format!("unknown colour '{name}'")))?;
        let second = ctx.ask([Question::text(
            "side",
            format!("How many pixels a side (1 to {MAX_SIDE_PX})?"),
        )])?;
        let side: u32 = second
            .text("side")
            .and_then(|t| t.trim().parse().ok())
            .filter(|side| (1..=MAX_SIDE_PX).contains(side))
            .ok_or_else(|| {
                GadgetError::invalid_arguments(format!(
                    "the side must be a whole number from 1 to {MAX_SIDE_PX}"
                ))
            })?;
        let png = png::square(side, rgb);
        ctx.info(format!("drew a {side}x{side} {name} swatch"));
        Ok(Outcome::result(format!("A {side}x{side} {name} swatch."))
            .with_part(Part::image("image/png", png))
            .with_structured(json!({ "colour": name, "side": side })))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct BlendParams {
    /// The first colour's name.
    from: String,
    /// The second colour's name.
    to: String,
    /// How many steps from one to the other (2 to 50).
    #[serde(default = "default_steps")]
    steps: u32,
}

fn default_steps() -> u32 {
    5
}

struct Blend;

impl Gadget for Blend {
    type Params = BlendParams;
    const NAME: &'static str = "Blend";
    const DESCRIPTION: &'static str =
        "Blends one named colour into another in even steps and lists the hex codes.";

    fn examples() -> Vec<Example> {
        vec![
            Example::new(json!({ "from": "black", "to": "white", "steps": 3 }))
                .output("#000000 #7f7f7f #ffffff"),
        ]
    }

    fn invoke(params: BlendParams, ctx: &Context) -> Result<Outcome, GadgetError> {
        let unknown = |n: &str| {
            GadgetError::invalid_arguments(format!(
                "unknown colour '{n}'; known: {}",
                names().join(", ")
            ))
        };
        let from = colour(&params.from).ok_or_else(|| unknown(&params.from))?;
        let to = colour(&params.to).ok_or_else(|| unknown(&params.to))?;
        if !(2..=50).contains(&params.steps) {
            return Err(GadgetError::invalid_arguments("steps must be from 2 to 50"));
        }
        let last = params.steps - 1;
        let mut codes = Vec::new();
        for step in 0..params.steps {
            ctx.check_cancelled()?;
            let mix = |a: u8, b: u8| {
                (f64::from(a) + (f64::from(b) - f64::from(a)) * f64::from(step) / f64::from(last))
                    as u8
            };
            codes.push(format!(
                "#{:02x}{:02x}{:02x}",
                mix(from[0], to[0]),
                mix(from[1], to[1]),
                mix(from[2], to[2])
            ));
            ctx.report_progress(
                f64::from(step + 1),
                Some(f64::from(params.steps)),
                Some(&format!("step {} of {}", step + 1, params.steps)),
            );
        }
        Ok(codes.join(" ").into())
    }
}

struct Swatches;

impl Catalog for Swatches {
    fn resources() -> Vec<Resource> {
        vec![
            Resource::new("palette://colours", "colours")
                .description("Every colour this plugin knows, with its hex code")
                .mime_type("application/json"),
        ]
    }

    fn templates() -> Vec<Template> {
        vec![
            Template::new("palette://swatch/{colour}", "swatch")
                .description("A 16x16 PNG swatch of a named colour")
                .mime_type("image/png"),
        ]
    }

    fn prompts() -> Vec<Prompt> {
        vec![
            Prompt::new(
                "paint",
                "Asks the model to describe a room painted in a colour",
            )
            .argument(Argument::required("colour", "The colour's name").examples(names())),
        ]
    }

    fn read(uri: &str, _ctx: &Context) -> Result<Vec<Contents>, ReadError> {
        if uri == "palette://colours" {
            let table: serde_json::Map<String, Value> = COLOURS
                .iter()
                .map(|(n, [r, g, b])| (n.to_string(), json!(format!("#{r:02x}{g:02x}{b:02x}"))))
                .collect();
            return Ok(vec![
                Contents::text(uri, Value::Object(table).to_string()).mime_type("application/json"),
            ]);
        }
        let name = uri
            .strip_prefix("palette://swatch/")
            .ok_or(ReadError::NotFound)?;
        let rgb = colour(name).ok_or(ReadError::NotFound)?;
        Ok(vec![
            Contents::blob(uri, png::square(16, rgb)).mime_type("image/png"),
        ])
    }

    fn prompt(
        _name: &str,
        arguments: &[(String, String)],
        _ctx: &Context,
    ) -> Result<Rendered, GadgetError> {
        let colour = arguments
            .iter()
            .find(|(k, _)| k == "colour")
            .map_or("", |(_, v)| v.as_str());
        let rgb = self::colour(colour)
            .ok_or_else(|| GadgetError::invalid_arguments(format!("unknown colour '{colour}'")))?;
        Ok(Rendered::default()
            .user(format!(
                "Describe, in two sentences, a quiet room painted {colour}."
            ))
            .user(Part::image("image/png", png::square(16, rgb))))
    }

    fn complete(_: &Reference, _: &str, value: &str, _: &[(String, String)]) -> Vec<String> {
        names()
            .into_iter()
            .filter(|n| n.starts_with(value))
            .map(str::to_string)
            .collect()
    }
}

gadget_sdk::export_gadgets!(Swatch, Blend; catalog = Swatches);

mod png {
    //! The smallest PNG writer that works: 8-bit RGB, one IDAT of stored
    //! (uncompressed) deflate blocks, each chunk's CRC-32 and the zlib
    //! stream's Adler-32 computed here, so the example needs no crate.

    /// A `side` x `side` square of one colour.
    pub fn square(side: u32, rgb: [u8; 3]) -> Vec<u8> {
        let row: Vec<u8> = std::iter::once(0u8) // filter type: none
            .chain((0..side).flat_map(|_| rgb))
            .collect();
        let raw: Vec<u8> = (0..side).flat_map(|_| row.iter().copied()).collect();
        let mut header = Vec::new();
        header.extend_from_slice(&side.to_be_bytes());
        header.extend_from_slice(&side.to_be_bytes());
        header.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit, RGB, deflate, no filter, no interlace
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        chunk(&mut png, b"IHDR", &header);
        chunk(&mut png, b"IDAT", &zlib_stored(&raw));
        chunk(&mut png, b"IEND", &[]);
        png
    }

    fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        png.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let start = png.len();
        png.extend_from_slice(kind);
        png.extend_from_slice(data);
        let crc = crc32(&png[start..]);
        png.extend_from_slice(&crc.to_be_bytes());
    }

    fn zlib_stored(data: &[u8]) -> Vec<u8> {
        let mut out = vec![0x78, 0x01];
        let blocks: Vec<&[u8]> = data.chunks(65_535).collect();
        for (i, block) in blocks.iter().enumerate() {
            out.push(u8::from(i + 1 == blocks.len()));
            let len = block.len() as u16;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&(!len).to_le_bytes());
            out.extend_from_slice(block);
        }
        let (mut a, mut b) = (1u32, 0u32);
        for byte in data {
            a = (a + u32::from(*byte)) % 65_521;
            b = (b + a) % 65_521;
        }
        out.extend_from_slice(&((b << 16) | a).to_be_bytes());
        out
    }

    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for byte in bytes {
            crc ^= u32::from(*byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
}
