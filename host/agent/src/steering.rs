//! A person steering a running session: messages typed while the agent
//! works join the conversation before its next request.

use std::sync::{Arc, Mutex};

/// Lets a person steer a running session: each message joins the
/// conversation before the next request (a session that was about to end
/// with an answer goes on to read it), as llmist's human input lets a
/// person speak between turns.
#[derive(Clone, Default)]
pub struct SteerHandle {
    pending: Arc<Mutex<Vec<String>>>,
}

impl SteerHandle {
    /// Queues `text` for the model's next turn. Bounded: past
    /// [`MAX_STEERING_MESSAGES`] waiting, the oldest is dropped.
    pub fn say(&self, text: impl Into<String>) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if pending.len() == MAX_STEERING_MESSAGES {
            pending.remove(0);
        }
        pending.push(gadget_core::text::truncate(
            text.into(),
            MAX_STEERING_MESSAGE_BYTES,
        ));
    }

    pub(crate) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn waiting(&self) -> bool {
        !self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }
}

/// Messages a person may queue between two requests; a person typing
/// faster than the model answers is not a reason to grow without bound.
pub const MAX_STEERING_MESSAGES: usize = 16;

/// Longest steering message, bytes (a paste, not a document).
pub const MAX_STEERING_MESSAGE_BYTES: usize = 16 << 10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_wait_in_order_within_their_bounds() {
        let steer = SteerHandle::default();
        assert!(!steer.waiting());
        for i in 0..MAX_STEERING_MESSAGES + 2 {
            steer.say(format!("m{i}"));
        }
        steer.say("x".repeat(MAX_STEERING_MESSAGE_BYTES + 10));
        let taken = steer.take();
        assert_eq!(taken.len(), MAX_STEERING_MESSAGES);
        assert_eq!(taken[0], "m3");
        assert!(taken.last().unwrap().contains("[truncated 10 bytes]"));
        assert!(!steer.waiting() && steer.take().is_empty());
    }
}
