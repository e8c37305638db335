//! The block format's default markers and the cap on one block.

/// The default start, end and argument markers.
pub const DEFAULT_START: &str = "!!!GADGET_START:";
pub const DEFAULT_END: &str = "!!!GADGET_END";
pub const DEFAULT_ARG: &str = "!!!ARG:";

/// Largest header line, and largest body, of one block, and largest text
/// segment held before it is emitted, in bytes. A model writing a single
/// 16 MiB tool call is broken or hostile; the cap bounds the parser's
/// memory (at most two caps, the longest marker and the current chunk are
/// buffered). Past it, the call carries a parse error and the rest of the
/// block is skipped; a longer text segment comes as several `Text`
/// events. Both happen at the same places for every chunking (only bytes
/// certain to belong to the block or the text are counted).
pub const MAX_BLOCK_BYTES: usize = 16 << 20;
