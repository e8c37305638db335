//! The SDKs `gadget` carries (`src/cli/sdks.rs`, include_dir) are read at
//! compile time: a change to them must rebuild the binary, which stable
//! Rust does not track for a directory a macro reads.

fn main() {
    for dir in ["../../sdk/rust/src", "../../sdk/go", "../../wit"] {
        println!("cargo:rerun-if-changed={dir}");
    }
}
