//! The `gadget` binary: see `gadget --help`.

fn main() -> std::process::ExitCode {
    gadget_host::cli::main()
}
