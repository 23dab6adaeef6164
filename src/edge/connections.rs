//! The platform's simultaneous-connection limit, per invocation. Cloudflare
//! lets one invocation have six subrequests waiting for their response
//! headers at once (fetches, Cache API reads, writes and deletes, Durable
//! Object calls); a seventh is queued by the runtime until one of them gets
//! its headers (since 2026-04-09 a connection's slot is freed when its
//! headers arrive, no longer when its body is done). workerd on a developer's
//! machine enforces nothing, so the Worker counts its own: every subrequest
//! takes a [`Slot`] before it starts and gives it back when its headers (or
//! its failure) arrive. A subrequest that would be the seventh waits here for
//! a free slot, in order, instead of queueing unseen behind the platform; a
//! hedge that would wait is not sent ([`Connections::try_take`]), as a late
//! hedge is worth less than none. The largest number waiting at once is
//! kept for the stats (`connections_waiting_max`), per invocation.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use futures::channel::oneshot;

/// Subrequests one invocation may have waiting for headers at once.
pub(crate) const LIMIT: u32 = 6;

thread_local! {
    /// The largest count any invocation of this isolate reached.
    static ISOLATE_PEAK: Cell<u32> = const { Cell::new(0) };
}

/// The most subrequests one invocation of this isolate had waiting for
/// headers at once, since the isolate started (the stats show it).
pub(crate) fn isolate_peak() -> u32 {
    ISOLATE_PEAK.with(Cell::get)
}

/// One invocation's subrequests waiting for headers.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    waiting: Cell<u32>,
    peak: Cell<u32>,
    queue: RefCell<VecDeque<oneshot::Sender<Slot>>>,
}

/// One subrequest's place among the six; given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    /// `None` once given back.
    owner: Option<Rc<Connections>>,
}

impl Connections {
    /// A counter for a new invocation.
    pub(crate) fn new() -> Rc<Self> {
        Rc::new(Self::default())
    }

    /// The largest number of subrequests that waited for headers at once.
    #[cfg(test)]
    fn peak(&self) -> u32 {
        self.peak.get()
    }

    /// A slot now, if one is free (and nobody queues for one).
    pub(crate) fn try_take(self: &Rc<Self>) -> Option<Slot> {
        if self.waiting.get() >= LIMIT || !self.queue.borrow().is_empty() {
            return None;
        }
        self.waiting.set(self.waiting.get() + 1);
        self.peak.set(self.peak.get().max(self.waiting.get()));
        ISOLATE_PEAK.with(|p| p.set(p.get().max(self.peak.get())));
        Some(Slot {
            owner: Some(Rc::clone(self)),
        })
    }

    /// A slot, waiting in line for one when six are taken.
    pub(crate) async fn take(self: &Rc<Self>) -> Slot {
        if let Some(slot) = self.try_take() {
            return slot;
        }
        let (tx, rx) = oneshot::channel();
        self.queue.borrow_mut().push_back(tx);
        // An error: the counter went away (the invocation ended), so
        // nothing is counted any more; go ahead uncounted.
        rx.await.unwrap_or(Slot { owner: None })
    }

    /// A slot given back: handed to the first in line still waiting, or
    /// counted free.
    fn give_back(owner: Rc<Connections>) {
        let mut owner = owner;
        loop {
            let next = owner.queue.borrow_mut().pop_front();
            let Some(next) = next else {
                break;
            };
            match next.send(Slot { owner: Some(owner) }) {
                Ok(()) => return,
                // That waiter gave up: the next one gets it.
                Err(mut returned) => match returned.owner.take() {
                    Some(back) => owner = back,
                    None => return,
                },
            }
        }
        owner.waiting.set(owner.waiting.get().saturating_sub(1));
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.take() {
            Connections::give_back(owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[test]
    fn six_at_once_then_the_seventh_waits_for_a_slot_given_back() {
        let c = Connections::new();
        let mut slots: Vec<Slot> = (0..6).map(|_| c.try_take().expect("free")).collect();
        assert!(c.try_take().is_none(), "a seventh is not free");
        let mut seventh = Box::pin(c.take());
        assert!(seventh.as_mut().now_or_never().is_none(), "it waits");
        slots.pop();
        let slot = seventh.now_or_never().expect("handed the slot given back");
        assert_eq!(c.peak(), 6);
        drop(slot);
        drop(slots);
        assert_eq!(c.waiting.get(), 0);
        assert!(c.try_take().is_some());
    }

    #[test]
    fn a_waiter_that_gave_up_passes_its_turn_on() {
        let c = Connections::new();
        let slots: Vec<Slot> = (0..6).map(|_| c.try_take().expect("free")).collect();
        let mut gone = Box::pin(c.take());
        assert!(gone.as_mut().now_or_never().is_none(), "in line");
        let mut next = Box::pin(c.take());
        assert!(next.as_mut().now_or_never().is_none());
        drop(gone);
        drop(slots);
        let held = next.now_or_never().expect("the slot passed on");
        assert_eq!(c.waiting.get(), 1, "only the waiter's slot is held");
        drop(held);
        assert_eq!(c.waiting.get(), 0);
    }
}
