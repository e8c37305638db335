//! Reading a stored output back: the viewer's parameters, and its line
//! and character modes.

use serde::Deserialize;

use super::limits::*;
use super::store::{OutputStore, StoredOutput};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Line,
    Character,
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Deserialize)]
struct Pattern {
    regex: String,
    #[serde(default = "default_true")]
    include: bool,
    #[serde(default)]
    before: usize,
    #[serde(default)]
    after: usize,
}

#[derive(Debug, Deserialize)]
pub(super) struct ViewParams {
    id: String,
    #[serde(default = "line_mode")]
    mode: Mode,
    #[serde(default)]
    patterns: Option<Vec<Pattern>>,
    #[serde(default)]
    limit: Option<String>,
}

fn line_mode() -> Mode {
    Mode::Line
}

/// A window of the limit grammar: `N-` first N, `-N` last N, `A-B` the
/// 1-based inclusive range. Anything else is no window at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Window {
    First(usize),
    Last(usize),
    Range(usize, usize),
}

/// llmist's `parseLimitWindow`, including `parseInt`'s leniency: `"5x-"`
/// reads as the first 5, `"-3abc"` as the last 3.
pub(super) fn parse_window(limit: &str) -> Option<Window> {
    let trimmed = crate::parser::js_trim(limit);
    if let Some(head) = trimmed.strip_suffix('-')
        && !trimmed.starts_with('-')
        && let Some(n) = parse_int_prefix(head)
        && n > 0
    {
        return Some(Window::First(n as usize));
    }
    if let Some(tail) = trimmed.strip_prefix('-')
        && !tail.contains('-')
        && let Some(n) = parse_int_prefix(tail)
        && n > 0
    {
        return Some(Window::Last(n as usize));
    }
    let (a, b) = trimmed.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if digits(a) && digits(b) {
        let (start, end) = (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?);
        if start > 0 && end >= start {
            return Some(Window::Range(start, end));
        }
    }
    None
}

/// JavaScript's `parseInt(s, 10)` for non-negative results: leading
/// whitespace and `+`, then as many digits as there are.
fn parse_int_prefix(text: &str) -> Option<u64> {
    let text = crate::parser::js_trim(text);
    let text = text.strip_prefix('+').unwrap_or(text);
    let digits: &str = &text[..text.bytes().take_while(u8::is_ascii_digit).count()];
    if digits.is_empty() {
        return None;
    }
    Some(digits.parse::<u64>().unwrap_or(u64::MAX))
}

/// `1234567` → `1,234,567` (JavaScript's `toLocaleString()` in en-US).
pub fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn plural(count: usize, singular: &str) -> String {
    if count == 1 {
        singular.to_string()
    } else {
        format!("{singular}s")
    }
}

pub(super) fn suggests_character_mode(stored: &StoredOutput, max_output_chars: usize) -> bool {
    stored.line_count <= 3
        && (stored.max_line_chars > max_output_chars || stored.max_line_chars >= DENSE_LINE_CHARS)
}

fn character_range_hint(start: usize, total: usize) -> Option<String> {
    if total == 0 || start > total {
        return None;
    }
    let end = total.min(start + CHARACTER_HINT_WINDOW - 1);
    Some(format!("{start}-{end}"))
}

pub(super) fn character_mode_suggestion(
    stored: &StoredOutput,
    start: usize,
    remove_patterns: bool,
) -> String {
    let hint = character_range_hint(start, stored.char_count)
        .map(|h| format!(", limit: \"{h}\""))
        .unwrap_or_default();
    format!(
        "This output is dense ({} {}; longest line {} chars). {} mode: \"character\"{hint}.",
        grouped(stored.line_count),
        plural(stored.line_count, "line"),
        grouped(stored.max_line_chars),
        if remove_patterns {
            "Remove patterns and then try"
        } else {
            "Try"
        },
    )
}

/// Byte offset of the `n`th character of `text` (its length past the end).
fn char_offset(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

pub(super) fn view(
    store: &OutputStore,
    params: &ViewParams,
    max_chars: usize,
) -> Result<String, String> {
    let Some(stored) = store.get(&params.id) else {
        let ids = if store.is_empty() {
            "(none)".to_string()
        } else {
            store.ids().join(", ")
        };
        return Ok(format!(
            "Error: No stored output with id \"{}\". Available IDs: {ids}",
            params.id
        ));
    };
    let patterns = params.patterns.as_deref().unwrap_or(&[]);
    match params.mode {
        Mode::Character if !patterns.is_empty() => Ok(
            "Error: patterns are only supported in mode \"line\". Remove patterns or switch back to mode: \"line\"."
                .into(),
        ),
        Mode::Character => Ok(view_characters(stored, params.limit.as_deref(), max_chars)),
        Mode::Line => view_lines(stored, patterns, params.limit.as_deref(), max_chars),
    }
}

fn view_characters(stored: &StoredOutput, limit: Option<&str>, max_chars: usize) -> String {
    let total = stored.char_count;
    if total == 0 {
        return "[Mode: character | Output is empty]".into();
    }
    let window = limit.and_then(parse_window);
    let (mut start, end) = match window {
        Some(Window::First(n)) => (0, n.min(total)),
        Some(Window::Last(n)) => (total.saturating_sub(n), total),
        Some(Window::Range(a, b)) => ((a - 1).min(total), b.min(total)),
        None => (0, total),
    };
    let mut len = end.saturating_sub(start);
    let truncated = len > max_chars;
    if truncated {
        if matches!(window, Some(Window::Last(_))) {
            start = end - max_chars;
        }
        len = max_chars;
    }
    let from = char_offset(&stored.content, start);
    let text = &stored.content[from..from + char_offset(&stored.content[from..], len)];
    let (shown_start, shown_end) = if len == 0 {
        (0, 0)
    } else {
        (start + 1, start + len)
    };
    let mut header = format!(
        "[Mode: character | Showing chars {}-{} of {}{}]",
        grouped(shown_start),
        grouped(shown_end),
        grouped(total),
        if truncated {
            " (truncated due to viewer size limit)"
        } else {
            ""
        }
    );
    if start + len < total
        && let Some(next) = character_range_hint(shown_end + 1, total)
    {
        header.push_str(&format!(
            "\n[Next chunk: mode: \"character\", limit: \"{next}\"]"
        ));
    }
    format!("{header}\n{text}")
}

fn compile(pattern: &str) -> Result<fancy_regex::Regex, String> {
    fancy_regex::RegexBuilder::new(pattern)
        .backtrack_limit(REGEX_BACKTRACK_LIMIT)
        .build()
        .map_err(|e| format!("Invalid regular expression: /{pattern}/: {e}"))
}

fn matches(regex: &fancy_regex::Regex, line: &str) -> Result<bool, String> {
    regex
        .is_match(line)
        .map_err(|e| format!("Regular expression /{}/ gave up: {e}", regex.as_str()))
}

fn apply_pattern<'a>(lines: Vec<&'a str>, pattern: &Pattern) -> Result<Vec<&'a str>, String> {
    let regex = compile(&pattern.regex)?;
    if !pattern.include {
        let mut kept = Vec::with_capacity(lines.len());
        for line in lines {
            if !matches(&regex, line)? {
                kept.push(line);
            }
        }
        return Ok(kept);
    }
    let mut keep = vec![false; lines.len()];
    for (i, line) in lines.iter().enumerate() {
        if matches(&regex, line)? {
            let from = i.saturating_sub(pattern.before);
            let to = (i.saturating_add(pattern.after)).min(lines.len() - 1);
            keep[from..=to].iter_mut().for_each(|k| *k = true);
        }
    }
    Ok(lines
        .into_iter()
        .zip(keep)
        .filter_map(|(line, k)| k.then_some(line))
        .collect())
}

fn view_lines(
    stored: &StoredOutput,
    patterns: &[Pattern],
    limit: Option<&str>,
    max_chars: usize,
) -> Result<String, String> {
    let mut lines: Vec<&str> = stored.content.split('\n').collect();
    for pattern in patterns {
        lines = apply_pattern(lines, pattern)?;
    }
    if let Some(window) = limit.and_then(parse_window) {
        lines = match window {
            Window::First(n) => lines[..n.min(lines.len())].to_vec(),
            Window::Last(n) => lines[lines.len().saturating_sub(n)..].to_vec(),
            Window::Range(a, b) => {
                let from = (a - 1).min(lines.len());
                lines[from..b.min(lines.len())].to_vec()
            }
        };
    }
    let total = stored.line_count;
    let total_label = plural(total, "line");
    let dense = suggests_character_mode(stored, max_chars);
    let remove_patterns = !patterns.is_empty();
    let returned = lines.len();
    if returned == 0 {
        let base = format!(
            "No lines matched the filters. Original output had {} lines.",
            grouped(total)
        );
        return Ok(if dense {
            format!(
                "{base} {}",
                character_mode_suggestion(stored, 1, remove_patterns)
            )
        } else {
            base
        });
    }
    // Sizes in characters: joined length is the lines plus the newlines.
    let joined_chars: usize = lines.iter().map(|l| l.chars().count()).sum::<usize>() + returned - 1;
    let mut included = returned;
    let mut clipped_first = false;
    let output = if joined_chars > max_chars {
        let mut out = String::new();
        let mut out_chars = 0;
        included = 0;
        for line in &lines {
            let addition = line.chars().count() + usize::from(included > 0);
            if out_chars + addition > max_chars {
                break;
            }
            if included > 0 {
                out.push('\n');
            }
            out.push_str(line);
            out_chars += addition;
            included += 1;
        }
        if included == 0 {
            clipped_first = true;
            included = 1;
            out = lines[0][..char_offset(lines[0], max_chars)].to_string();
        }
        out
    } else {
        lines.join("\n")
    };
    let header = if clipped_first {
        format!(
            "[Mode: line | Showing 1 partial line of {} {total_label} (the selected line exceeds the viewer size limit)]\n",
            grouped(total)
        )
    } else if joined_chars > max_chars {
        let remaining = returned - included;
        format!(
            "[Mode: line | Showing {} of {} {total_label} (truncated due to size limit)]\n[... {} more {}. Use limit parameter to paginate, e.g., limit: \"{}-{}\"]\n",
            grouped(included),
            grouped(total),
            grouped(remaining),
            plural(remaining, "line"),
            included + 1,
            included + 200
        )
    } else if returned < total {
        format!(
            "[Mode: line | Showing {} of {} {total_label}]\n",
            grouped(returned),
            grouped(total)
        )
    } else {
        format!(
            "[Mode: line | Showing all {} {total_label}]\n",
            grouped(total)
        )
    };
    let footer = if dense || clipped_first {
        format!(
            "\n[Tip: {}]",
            character_mode_suggestion(stored, 1, remove_patterns)
        )
    } else {
        String::new()
    };
    Ok(format!("{header}{output}{footer}"))
}
