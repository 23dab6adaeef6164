//! What the Hedger's action asks of the engine during one event, kept until
//! the Hedger returns.

use crate::race::{Action, Hedger, Leg, RaceEnd, RaceState};

/// What one action asked, carried out once the Hedger returns (the engine
/// cannot act while the Hedger, one of its parts, is borrowed). At most
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

    /// What `action` asks, as the Worker's driver reads it: a hedge is
    /// booked as sent at once (a modelled origin is always reachable); the
    /// race's end, once it is over.
    pub(super) fn of(
        hedger: &mut Hedger,
        race: &mut RaceState,
        action: Action,
        now_ms: f64,
    ) -> (Self, Option<RaceEnd>) {
        let mut intents = Self::default();
        let end = match action {
            Action::Wait => None,
            Action::SendHedge {
                origin,
                abort_primary,
            } => {
                if abort_primary {
                    intents.push(Intent::Abort(Leg::Primary));
                }
                intents.push(Intent::SendHedge(origin));
                hedger.hedge_sent(race, now_ms);
                None
            }
            Action::Finish(end) => {
                for leg in [Leg::Primary, Leg::Hedge] {
                    if Some(leg) != end.kept_leg() {
                        intents.push(Intent::Abort(leg));
                    }
                }
                Some(end)
            }
        };
        (intents, end)
    }
}
