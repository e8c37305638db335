//! The viewer's names and limits.

/// The viewer's name, as the model writes it.
pub const VIEWER_NAME: &str = "GadgetOutputViewer";

/// The share of the context window one result may take, by default
/// (the seeds' 15%).
pub const DEFAULT_OUTPUT_LIMIT_PERCENT: u32 = 15;

/// The model's context window, in tokens, when none is given: llmist's
/// fallback for models it does not know.
pub const DEFAULT_CONTEXT_WINDOW_TOKENS: u64 = 128_000;

/// Characters per token for sizing the limit: the seeds' rule of thumb
/// (llmist itself uses 2, which halves every limit).
pub const CHARS_PER_TOKEN: u64 = 4;

/// Characters a character-mode "next chunk" hint spans (llmist's window).
pub const CHARACTER_HINT_WINDOW: usize = 2_000;

/// A line this long (characters) in an output of at most 3 lines makes it
/// "dense": the viewer suggests character mode (llmist's threshold).
pub const DENSE_LINE_CHARS: usize = 4_000;

/// Outputs one session keeps for the viewer. The oldest goes first past
/// it, so a long session cannot grow without bound; 64 results of the
/// default 76,800-character limit and more is tens of megabytes at most.
pub const MAX_STORED_OUTPUTS: usize = 64;

/// Bytes one stored output may take; anything longer is kept up to here
/// (at a character boundary) and the message says so. Gadget results are
/// already capped by the runtime's result limit (4 MiB by default, 64 MiB
/// at most); this bounds the store whatever the runtime was told.
pub const MAX_STORED_OUTPUT_BYTES: usize = 16 << 20;

/// Bytes all of a session's stored outputs may take together: the oldest
/// go first past it, so 64 outputs of 16 MiB cannot pin a gigabyte.
pub const MAX_STORED_TOTAL_BYTES: usize = 64 << 20;

/// Backtracking steps one viewer pattern may take on one line before it
/// gives up with an error: a model's regex must not hang the host.
pub const REGEX_BACKTRACK_LIMIT: usize = 1_000_000;
