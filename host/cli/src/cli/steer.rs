//! Steering `gadget agent` from the terminal: a line typed while the agent
//! works goes to the model before its next request.
//!
//! The terminal is also where approvals and gadgets' questions are asked,
//! so once steering is on one thread reads `/dev/tty` and routes each line:
//! to the prompt waiting for an answer if there is one ([`answer`]),
//! otherwise to the model. Without steering, prompts read the terminal
//! themselves, as before.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use gadget_agent::agent::SteerHandle;

/// Where typed lines go while steering is on.
struct Router {
    /// The prompt waiting for its answer, if any: it takes the next line.
    prompt: Mutex<Option<mpsc::Sender<String>>>,
    steer: SteerHandle,
    /// The reader still reads: once the terminal is gone, prompts read it
    /// themselves again (a prompt registered with nobody reading would
    /// wait forever).
    reading: AtomicBool,
}

static ROUTER: OnceLock<Router> = OnceLock::new();

/// Starts reading the terminal for `steer` when there is one to read (and
/// a person at it: stderr is a terminal); says so in one line. Returns
/// whether steering is on.
pub fn from_terminal(steer: &SteerHandle, json: bool) -> bool {
    if !std::io::stderr().is_terminal() || ROUTER.get().is_some() {
        return false;
    }
    let Ok(tty) = std::fs::File::open("/dev/tty") else {
        return false;
    };
    // Only the terminal the person sees this session on: a process whose
    // stderr is another terminal than its controlling one (a test's
    // pseudo-terminal under a developer's shell) reads nobody's keys.
    // SAFETY: both calls only read the process's own session and fd 2.
    let (terminal_session, own_session) = unsafe { (libc::tcgetsid(2), libc::getsid(0)) };
    if terminal_session < 0 || terminal_session != own_session {
        return false;
    }
    let router = ROUTER.get_or_init(|| Router {
        prompt: Mutex::new(None),
        steer: steer.clone(),
        reading: AtomicBool::new(true),
    });
    let started = std::thread::Builder::new()
        .name("steer".into())
        .spawn(move || read_lines(tty, router));
    if started.is_err() {
        return false;
    }
    if !json {
        eprintln!("(type a message and Enter to tell the model at its next turn)");
    }
    true
}

/// Routes each line until the terminal closes. Detached: it ends with the
/// process.
fn read_lines(tty: std::fs::File, router: &'static Router) {
    for line in std::io::BufReader::new(tty).lines() {
        let Ok(line) = line else { break };
        let line = line.trim_end_matches('\r').to_string();
        let waiting = router
            .prompt
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match waiting {
            Some(prompt) => {
                let _ = prompt.send(line);
            }
            None if !line.trim().is_empty() => router.steer.say(line),
            None => {}
        }
    }
    // The terminal is gone: a prompt waiting now is told so (its sender
    // dropped, under the lock `answer` registers with), and later ones
    // read the terminal themselves.
    let mut prompt = router.prompt.lock().unwrap_or_else(|p| p.into_inner());
    router.reading.store(false, Ordering::Relaxed);
    prompt.take();
}

/// While steering is on: writes `prompt` to the terminal and takes the
/// next line typed. `None` when steering is off (the caller reads the
/// terminal itself). Blocking: call it off the async threads.
pub fn answer(prompt: &str) -> Option<std::io::Result<String>> {
    let router = ROUTER.get()?;
    let (tx, rx) = mpsc::channel();
    {
        let mut prompt = router.prompt.lock().unwrap_or_else(|p| p.into_inner());
        if !router.reading.load(Ordering::Relaxed) {
            return None;
        }
        *prompt = Some(tx);
    }
    let written = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/tty")
        .and_then(|mut tty| {
            tty.write_all(prompt.as_bytes())?;
            tty.flush()
        });
    Some(written.and_then(|()| {
        rx.recv()
            .map_err(|_| std::io::Error::other("the terminal closed"))
    }))
}
