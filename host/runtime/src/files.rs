//! The files door: granted directories held open from load (`dirs`), the
//! guards in front of the WASI filesystem operations that create or grow
//! things (`shims`, written against [`shims::FilesView`], the door's part
//! of a call's store), and what a call's file operations are told as
//! (`log`).

mod dirs;
mod log;
mod shims;

pub(crate) use dirs::CallFiles;
pub use dirs::nested_grant_notes;
pub(crate) use shims::{FilesView, add_guards_to_linker, add_logged_to_linker};
