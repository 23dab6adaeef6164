//! The isolate's own event loop as a queue: an event waits while the loop
//! is busy, and each request's and leg's work keeps it busy.

use super::{Event, Sim};

impl Sim<'_> {
    /// When `isolate`'s loop is busy past now: the time it is next free.
    pub(super) fn loop_busy_until(&self, isolate: usize) -> Option<f64> {
        self.params.isolate_cpu?;
        let free = self.loop_free_at[isolate];
        (free > self.now).then_some(free)
    }

    /// Puts `event` of request `req` back until its isolate's loop is free;
    /// `true` when it must wait.
    pub(super) fn waits_for_loop(&mut self, req: u32, event: Event) -> bool {
        let Some(r) = self.requests.get(req as usize) else {
            return false;
        };
        if r.race.is_none() {
            return false;
        }
        match self.loop_busy_until(r.isolate as usize) {
            Some(free) => {
                self.schedule(free, event);
                true
            }
            None => false,
        }
    }

    /// The loop of `isolate` works `ms` from now (or from when it is free).
    pub(super) fn spend(&mut self, isolate: usize, ms: f64) {
        if self.params.isolate_cpu.is_none() || ms <= 0.0 {
            return;
        }
        let start = self.loop_free_at[isolate].max(self.now);
        self.loop_free_at[isolate] = start + ms;
        if self.now >= self.measure_from_ms {
            self.loop_busy_ms += ms;
        }
    }

    /// An event due at `due_ms` runs now: how long it waited for the loop.
    pub(super) fn note_wait(&mut self, due_ms: f64) {
        if self.params.isolate_cpu.is_some() && due_ms >= self.measure_from_ms {
            self.result.loop_waits.0 += self.now - due_ms;
            self.result.loop_waits.1 += 1;
        }
    }
}
