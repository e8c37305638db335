//! Files for agents, confined to what the operator grants.
//!
//! - `ReadFile`: a text file's content (capped), with its size.
//! - `ListDir`: a directory's entries (optionally recursive, capped).
//! - `WriteFile`: create, replace or append to a file.
//! - `Grep`: lines matching a regular expression in a file or under a
//!   directory.
//!
//! The plugin asks for `files = [{ path = "*", mode = "rw" }]`: it sees the
//! directories the operator grants (`[plugins.files] files = [...]` or
//! `--grant files:files=DIR`), at the guest paths the grant names, and can
//! write only where the grant says `rw`. Nothing else of the host's file
//! system exists for it: the host opens each granted directory as a
//! capability, and `..`, absolute paths and symlinks cannot leave it.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use gadget_sdk::{Context, Example, Gadget, GadgetError, Outcome, json};
use schemars::JsonSchema;
use serde::Deserialize;

/// Most bytes `ReadFile` returns: a model's context is precious.
const DEFAULT_READ_BYTES: u64 = 64 << 10;
const MAX_READ_BYTES: u64 = 1 << 20;
/// Most entries `ListDir` returns.
const DEFAULT_LIST_ENTRIES: usize = 200;
/// Most matches `Grep` returns, and the largest file it searches.
const DEFAULT_GREP_MATCHES: usize = 100;
const MAX_GREP_FILE_BYTES: u64 = 8 << 20;
/// Longest line shown in a match, in characters.
const MAX_MATCH_LINE_CHARS: usize = 300;

/// The error a gadget returns for an I/O failure, with a hint the model can
/// act on.
fn io_error(action: &str, path: &str, error: std::io::Error) -> GadgetError {
    let hint = match error.kind() {
        std::io::ErrorKind::NotFound => {
            " (it does not exist, or is outside the directories granted to this plugin)"
        }
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => {
            " (the directory is granted read-only, or the path is outside the grants)"
        }
        _ => "",
    };
    GadgetError::failed(format!("cannot {action} {path}: {error}{hint}"))
}

#[derive(Debug, Deserialize, JsonSchema)]
struct ReadParams {
    /// The file, as a path inside a granted directory, such as /data/notes.txt.
    #[schemars(extend("format" = "path"))]
    path: String,
    /// Most bytes to return; the rest is cut (and said so).
    #[serde(default = "default_read_bytes")]
    max_bytes: u64,
}

fn default_read_bytes() -> u64 {
    DEFAULT_READ_BYTES
}

struct ReadFile;
impl Gadget for ReadFile {
    type Params = ReadParams;
    const NAME: &'static str = "ReadFile";
    const LABEL: Option<&'static str> = Some("Read a file");
    const DESCRIPTION: &'static str = "Reads a text file inside the directories granted to this plugin and returns its content (cut at max_bytes).";

    fn examples() -> Vec<Example> {
        vec![
            Example::new(json!({"path": "/data/notes.txt"}))
                .comment("Read a file from the granted /data directory"),
        ]
    }

    fn invoke(p: ReadParams, _ctx: &Context) -> Result<Outcome, GadgetError> {
        if p.max_bytes == 0 || p.max_bytes > MAX_READ_BYTES {
            return Err(GadgetError::invalid_arguments(format!(
                "max_bytes must be between 1 and {MAX_READ_BYTES}"
            )));
        }
        let file = fs::File::open(&p.path).map_err(|e| io_error("read", &p.path, e))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let mut bytes = Vec::new();
        file.take(p.max_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| io_error("read", &p.path, e))?;
        let truncated = size > bytes.len() as u64;
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if truncated {
            text.push_str(&format!("\n[cut: showing {} of {size} bytes]", bytes.len()));
        }
        Ok(Outcome::result(text).with_details(json!({
            "path": p.path,
            "bytes": size,
            "truncated": truncated,
        })))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct ListParams {
    /// The directory, such as /data.
    #[schemars(extend("format" = "path"))]
    path: String,
    /// Also list what is inside subdirectories.
    #[serde(default)]
    recursive: bool,
    /// Most entries to return.
    #[serde(default = "default_list_entries")]
    max_entries: usize,
}

fn default_list_entries() -> usize {
    DEFAULT_LIST_ENTRIES
}

struct ListDir;
impl Gadget for ListDir {
    type Params = ListParams;
    const NAME: &'static str = "ListDir";
    const LABEL: Option<&'static str> = Some("List a directory");
    const DESCRIPTION: &'static str = "Lists the files and directories in a directory granted to this plugin (with sizes; recursive on request).";

    fn examples() -> Vec<Example> {
        vec![Example::new(json!({"path": "/data", "recursive": true}))]
    }

    fn invoke(p: ListParams, _ctx: &Context) -> Result<Outcome, GadgetError> {
        if p.max_entries == 0 {
            return Err(GadgetError::invalid_arguments(
                "max_entries must be at least 1",
            ));
        }
        let mut lines = Vec::new();
        let mut more = false;
        {
            let mut pending = vec![PathBuf::from(&p.path)];
            while let Some(dir) = pending.pop() {
                let display = dir.display().to_string();
                let mut entries: Vec<_> = fs::read_dir(&dir)
                    .map_err(|e| io_error("list", &display, e))?
                    .filter_map(Result::ok)
                    .collect();
                entries.sort_by_key(|e| e.file_name());
                for entry in entries {
                    if lines.len() == p.max_entries {
                        more = true;
                        break;
                    }
                    let path = entry.path();
                    let meta = entry.metadata();
                    let is_dir = meta.as_ref().is_ok_and(|m| m.is_dir());
                    if is_dir {
                        lines.push(format!("{}/", path.display()));
                        if p.recursive {
                            pending.push(path);
                        }
                    } else {
                        let size = meta.map(|m| m.len()).unwrap_or(0);
                        lines.push(format!("{} ({size} bytes)", path.display()));
                    }
                }
                if more {
                    break;
                }
            }
        }
        let count = lines.len();
        let mut text = if lines.is_empty() {
            format!("{} is empty", p.path)
        } else {
            lines.join("\n")
        };
        if more {
            text.push_str(&format!("\n[cut at {} entries]", p.max_entries));
        }
        Ok(Outcome::result(text).with_details(json!({"entries": count, "truncated": more})))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct WriteParams {
    /// The file, as a path inside a directory granted read-write, such as /out/report.md.
    #[schemars(extend("format" = "path"))]
    path: String,
    /// The text to write.
    content: String,
    /// Add to the end of the file instead of replacing it.
    #[serde(default)]
    append: bool,
}

struct WriteFile;
impl Gadget for WriteFile {
    type Params = WriteParams;
    const NAME: &'static str = "WriteFile";
    const LABEL: Option<&'static str> = Some("Write a file");
    const DESCRIPTION: &'static str = "Writes text to a file inside a directory granted read-write to this plugin (creates it, replaces it, or appends).";

    fn examples() -> Vec<Example> {
        vec![Example::new(
            json!({"path": "/out/summary.md", "content": "# Summary\n"}),
        )]
    }

    fn invoke(p: WriteParams, _ctx: &Context) -> Result<Outcome, GadgetError> {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .append(p.append)
            .truncate(!p.append)
            .open(&p.path)
            .map_err(|e| io_error("write", &p.path, e))?;
        file.write_all(p.content.as_bytes())
            .map_err(|e| io_error("write", &p.path, e))?;
        Ok(Outcome::result(format!(
            "{} {} bytes to {}",
            if p.append { "appended" } else { "wrote" },
            p.content.len(),
            p.path
        )))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct GrepParams {
    /// A regular expression (Rust syntax), such as `TODO|FIXME`.
    pattern: String,
    /// A file, or a directory searched recursively, inside the grants.
    #[schemars(extend("format" = "path"))]
    path: String,
    /// Match without regard to case.
    #[serde(default)]
    ignore_case: bool,
    /// Most matching lines to return.
    #[serde(default = "default_grep_matches")]
    max_matches: usize,
}

fn default_grep_matches() -> usize {
    DEFAULT_GREP_MATCHES
}

struct Grep;
impl Gadget for Grep {
    type Params = GrepParams;
    const NAME: &'static str = "Grep";
    const LABEL: Option<&'static str> = Some("Search files");
    const DESCRIPTION: &'static str = "Finds the lines matching a regular expression in a file, or in every file under a directory, inside the directories granted to this plugin. Returns path:line: text.";

    fn examples() -> Vec<Example> {
        vec![Example::new(json!({"pattern": "TODO", "path": "/data"}))]
    }

    fn invoke(p: GrepParams, ctx: &Context) -> Result<Outcome, GadgetError> {
        let regex = regex::RegexBuilder::new(&p.pattern)
            .case_insensitive(p.ignore_case)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| GadgetError::invalid_arguments(format!("pattern: {e}")))?;
        let mut matches = Vec::new();
        let mut files = 0;
        let root = PathBuf::from(&p.path);
        let mut pending = vec![root.clone()];
        let mut more = false;
        let mut unreadable = 0;
        'walk: while let Some(path) = pending.pop() {
            ctx.check_cancelled()?;
            let display = path.display().to_string();
            // The path asked for must be there; below it, what cannot be
            // read (a symlink out of the grant, say) is skipped and counted.
            let meta = match fs::metadata(&path) {
                Ok(meta) => meta,
                Err(e) if path == root => return Err(io_error("search", &display, e)),
                Err(_) => {
                    unreadable += 1;
                    continue;
                }
            };
            if meta.is_dir() {
                let entries = match fs::read_dir(&path) {
                    Ok(entries) => entries,
                    Err(e) if path == root => return Err(io_error("search", &display, e)),
                    Err(_) => {
                        unreadable += 1;
                        continue;
                    }
                };
                let mut entries: Vec<PathBuf> =
                    entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
                entries.sort();
                pending.extend(entries.into_iter().rev());
                continue;
            }
            if meta.len() > MAX_GREP_FILE_BYTES {
                continue;
            }
            let Ok(bytes) = fs::read(&path) else {
                unreadable += 1;
                continue;
            };
            if bytes.contains(&0) {
                continue; // binary
            }
            files += 1;
            for (number, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
                if regex.is_match(line) {
                    if matches.len() == p.max_matches {
                        more = true;
                        break 'walk;
                    }
                    let line: String = line.chars().take(MAX_MATCH_LINE_CHARS).collect();
                    matches.push(format!("{}:{}: {line}", display_path(&path), number + 1));
                }
            }
        }
        let count = matches.len();
        let mut text = if matches.is_empty() {
            format!("no line matches /{}/ in {files} file(s)", p.pattern)
        } else {
            matches.join("\n")
        };
        if more {
            text.push_str(&format!("\n[cut at {} matches]", p.max_matches));
        }
        if unreadable > 0 {
            text.push_str(&format!(
                "\n[{unreadable} entries could not be read (outside the grant, or not permitted) and were skipped]"
            ));
        }
        Ok(Outcome::result(text).with_details(json!({
            "matches": count,
            "files_searched": files,
            "unreadable": unreadable,
            "truncated": more,
        })))
    }
}

fn display_path(path: &Path) -> String {
    path.display().to_string()
}

gadget_sdk::export_gadgets!(ReadFile, ListDir, WriteFile, Grep);
