//! What the Hedger asks of the engine during one event, kept until it
//! returns.

use crate::race::{Leg, RaceIo};

/// What the Hedger asked of one event, carried out once it returns (the
/// engine cannot act while the Hedger, one of its parts, is borrowed). At most
/// three: abort the primary and send the hedge, or abort both legs.
#[derive(Debug, Default)]
pub(super) struct Intents {
    pub(super) list: [Option<Intent>; 3],
    pub(super) len: usize,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Intent {
    Abort(Leg),
    SendHedge(usize),
}

impl Intents {
    fn push(&mut self, intent: Intent) {
        if let Some(slot) = self.list.get_mut(self.len) {
            *slot = Some(intent);
            self.len += 1;
        }
    }
}

impl RaceIo for Intents {
    fn abort(&mut self, leg: Leg) {
        self.push(Intent::Abort(leg));
    }

    fn send_hedge(&mut self, origin: usize) -> bool {
        // A modelled origin is always reachable.
        self.push(Intent::SendHedge(origin));
        true
    }
}
