//! The web for agents, confined to the origins the operator grants.
//!
//! - `FetchUrl`: GET a URL; an HTML page comes back as readable text
//!   (scripts, styles and tags removed, entities decoded, whitespace
//!   collapsed), text and JSON as they are; the title and the final URL
//!   (after redirects) are in the details.
//!
//! The plugin asks for `http = ["*"]`: it reaches exactly the origins the
//! operator grants (`[plugins.web] http = ["https://en.wikipedia.org"]` or
//! `--grant web:http=URL`). The host sends the requests, refuses internal
//! addresses unless allowed, caps the body and never follows a redirect by
//! itself: `FetchUrl` follows up to [`MAX_REDIRECTS`], each hop checked by
//! the host like a new request.

use gadget_sdk::http::{self, Response};
use gadget_sdk::{Context, Example, Gadget, GadgetError, Outcome, json};
use schemars::JsonSchema;
use serde::Deserialize;

/// Redirects followed before giving up.
const MAX_REDIRECTS: usize = 5;
/// Characters of text returned by default, and at most.
const DEFAULT_MAX_CHARS: usize = 20_000;
const MAX_CHARS: usize = 200_000;

#[derive(Debug, Deserialize, JsonSchema)]
struct FetchParams {
    /// The page, an http or https URL.
    #[schemars(url)]
    url: String,
    /// Most characters of text to return; the rest is cut (and said so).
    #[serde(default = "default_max_chars")]
    max_chars: usize,
}

fn default_max_chars() -> usize {
    DEFAULT_MAX_CHARS
}

struct FetchUrl;
impl Gadget for FetchUrl {
    type Params = FetchParams;
    const NAME: &'static str = "FetchUrl";
    const LABEL: Option<&'static str> = Some("Fetch a web page");
    const DESCRIPTION: &'static str = "Fetches a URL (GET) and returns its readable text: an HTML page without markup, or a text or JSON body as it is. Only the sites the operator allows can be reached.";

    fn examples() -> Vec<Example> {
        vec![
            Example::new(json!({"url": "https://en.wikipedia.org/wiki/WebAssembly"}))
                .comment("Read a page as text"),
        ]
    }

    fn invoke(p: FetchParams, ctx: &Context) -> Result<Outcome, GadgetError> {
        if p.max_chars == 0 || p.max_chars > MAX_CHARS {
            return Err(GadgetError::invalid_arguments(format!(
                "max_chars must be between 1 and {MAX_CHARS}"
            )));
        }
        let mut url = p.url.clone();
        let mut response = fetch(&url)?;
        for _ in 0..MAX_REDIRECTS {
            if !(300..400).contains(&response.status) {
                break;
            }
            let Some(location) = response.header("location") else {
                break;
            };
            url = resolve(&url, location);
            ctx.progress(format!("redirected to {url}"));
            response = fetch(&url)?;
        }
        if (300..400).contains(&response.status) {
            return Err(GadgetError::failed(format!(
                "{url} still redirects after {MAX_REDIRECTS} hops"
            )));
        }
        let content_type = response
            .header("content-type")
            .unwrap_or("")
            .to_ascii_lowercase();
        let body = response.text();
        let (title, text) = if content_type.contains("html") || looks_like_html(&body) {
            (title_of(&body), html_to_text(&body))
        } else if content_type.is_empty()
            || content_type.starts_with("text/")
            || content_type.contains("json")
            || content_type.contains("xml")
        {
            (None, body)
        } else {
            return Err(GadgetError::failed(format!(
                "{url} is {content_type}, not text this gadget can read"
            )));
        };
        let mut shown: String = text.chars().take(p.max_chars).collect();
        let total = text.chars().count();
        if total > p.max_chars {
            shown.push_str(&format!("\n[cut: {} of {total} characters]", p.max_chars));
        }
        if response.status >= 400 {
            return Err(GadgetError::failed(format!(
                "{url} answered {}: {}",
                response.status,
                shown.chars().take(500).collect::<String>()
            )));
        }
        Ok(Outcome::result(shown).with_details(json!({
            "url": p.url,
            "final_url": url,
            "status": response.status,
            "title": title,
            "content_type": content_type,
            "bytes": response.body.len(),
        })))
    }
}

fn fetch(url: &str) -> Result<Response, GadgetError> {
    http::get(url).map_err(|e| GadgetError::failed(format!("{url}: {e}")))
}

/// A `location` resolved against the URL it came from.
fn resolve(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("https", base));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    if let Some(path) = location.strip_prefix("//") {
        return format!("{scheme}://{path}");
    }
    if location.starts_with('/') {
        return format!("{scheme}://{authority}{location}");
    }
    let path = &rest[authority.len()..];
    let dir = match path.rfind('/') {
        Some(at) => &path[..=at],
        None => "/",
    };
    format!("{scheme}://{authority}{dir}{location}")
}

fn looks_like_html(body: &str) -> bool {
    let start: String = body
        .chars()
        .take(512)
        .collect::<String>()
        .to_ascii_lowercase();
    start.contains("<!doctype html") || start.contains("<html")
}

fn title_of(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let start = lower.find("<title")?;
    let open_end = lower[start..].find('>')? + start + 1;
    let close = lower[open_end..].find("</title")? + open_end;
    let title = collapse(&decode_entities(&html[open_end..close]));
    (!title.is_empty()).then_some(title)
}

/// Readable text from HTML: no scripts, styles or tags; block elements
/// become line breaks; entities decoded; runs of blank space collapsed.
fn html_to_text(html: &str) -> String {
    const SKIPPED: [&str; 6] = ["script", "style", "noscript", "template", "svg", "title"];
    const BLOCKS: [&str; 16] = [
        "p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
        "header", "footer", "pre",
    ];
    let mut out = String::with_capacity(html.len() / 2);
    let lower = html.to_ascii_lowercase();
    let mut i = 0;
    while i < html.len() {
        let rest = &html[i..];
        if rest.starts_with("<!--") {
            i += rest.find("-->").map_or(rest.len(), |e| e + 3);
            continue;
        }
        if rest.starts_with('<') {
            let end = match rest.find('>') {
                Some(end) => end,
                None => break,
            };
            let tag = lower[i + 1..i + end]
                .trim_start_matches('/')
                .split(|c: char| c.is_whitespace() || c == '/')
                .next()
                .unwrap_or("")
                .to_string();
            i += end + 1;
            if SKIPPED.contains(&tag.as_str()) && !lower[i - end - 1..].starts_with("</") {
                let close = format!("</{tag}");
                i += lower[i..].find(&close).map_or(html.len() - i, |at| {
                    at + lower[i + at..].find('>').map_or(0, |e| e + 1)
                });
                continue;
            }
            if BLOCKS.contains(&tag.as_str()) {
                out.push('\n');
            } else {
                out.push(' ');
            }
            continue;
        }
        let next = rest.find('<').unwrap_or(rest.len());
        out.push_str(&decode_entities(&rest[..next]));
        i += next;
    }
    out.lines()
        .map(collapse)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let Some(end) = rest[..rest.len().min(12)].find(';') else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..end];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" | "#39" => Some('\''),
            "nbsp" => Some(' '),
            _ => entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

gadget_sdk::export_gadgets!(FetchUrl);
