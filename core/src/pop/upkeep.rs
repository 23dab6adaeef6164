//! What keeps one PoP aggregator cheap and answering: which pushes it takes
//! (a Durable Object is single-threaded, so past its capacity every push
//! waits for all before it and answers grow without bound; it sheds instead)
//! and when its state is written to storage (every row written is billed; a
//! lost minute is refilled by the next pushes).

/// Pushes per second the aggregator takes before it sheds. Measured with
/// `node lab/pop-capacity.mjs` (docs/pop.md): on the lab machine one
/// aggregator answered 800 pushes/s of 2.6-2.7 KB with p99 49 and 63 ms in
/// two runs (3 ms at 400/s) while its driver shared its thread; past that,
/// answers wait in its queue.
/// 800 is 4x the 200 pushes/s of 1,000 isolates at the default 5 s interval.
pub const SHED_ABOVE_PUSHES_PER_S: f64 = 800.0;

/// How long a shed isolate is told to wait before pushing again (its own
/// back-off doubles from its interval; this is the least).
pub const SHED_RETRY_AFTER_S: u32 = 10;

/// How often the aggregator writes what changed to storage. An evicted
/// aggregator loses at most this much; the pushes of the next interval refill
/// it (docs/pop.md: measured). One write per minute costs a PoP 43,200 rows
/// a month per key.
pub const SNAPSHOT_EVERY_MS: f64 = 60_000.0;

/// Admits pushes at up to a rate, with a burst of one second's worth (a
/// token bucket, time passed in).
#[derive(Debug, Clone)]
pub struct PushLimiter {
    per_s: f64,
    tokens: f64,
    at_ms: f64,
    /// Pushes shed since the aggregator started.
    pub shed: u64,
}

impl PushLimiter {
    /// Takes up to `per_s` pushes a second.
    pub fn new(per_s: f64) -> Self {
        Self {
            per_s,
            tokens: per_s,
            at_ms: f64::NEG_INFINITY,
            shed: 0,
        }
    }

    /// Whether a push arriving at `now_ms` is taken.
    pub fn try_take(&mut self, now_ms: f64) -> bool {
        let elapsed_s = ((now_ms - self.at_ms) / 1_000.0).max(0.0);
        self.tokens = (self.tokens + elapsed_s * self.per_s).min(self.per_s);
        self.at_ms = now_ms;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.shed += 1;
            false
        }
    }
}

/// An aggregator writes each of its first this many changes at once: a new
/// or small PoP's data (what a restart would lose whole, and what its few
/// pushes refill slowly) survives a restart; a busy PoP pays for it once.
pub const SNAPSHOT_AT_ONCE: u64 = 20;

/// When the next snapshot is due: each of the first [`SNAPSHOT_AT_ONCE`]
/// changes at once, then at most every [`SNAPSHOT_EVERY_MS`].
#[derive(Debug, Clone, Default)]
pub struct SnapshotSchedule {
    last_ms: Option<f64>,
    dirty: bool,
    snapshots: u64,
    /// Rows written since the aggregator started (keys and counters).
    pub rows_written: u64,
}

impl SnapshotSchedule {
    /// The schedule of an object woken (from hibernation or eviction) with
    /// stored state at `now_ms`: that state was written, so its first
    /// changes are not written at once again (a quiet PoP whose pushes
    /// come more than ten seconds apart wakes its object on nearly every
    /// push, and wrote about 7 rows each time), and the next snapshot falls
    /// a minute on.
    pub fn resumed(now_ms: f64) -> Self {
        Self {
            last_ms: Some(now_ms),
            dirty: false,
            snapshots: SNAPSHOT_AT_ONCE,
            rows_written: 0,
        }
    }

    /// The state changed at `now_ms`; says whether to write it now.
    pub fn changed(&mut self, now_ms: f64) -> bool {
        self.dirty = true;
        self.snapshots < SNAPSHOT_AT_ONCE || self.due(now_ms)
    }

    /// Whether unsaved changes are due to be written at `now_ms`.
    pub fn due(&self, now_ms: f64) -> bool {
        self.dirty
            && self
                .last_ms
                .is_none_or(|last| now_ms - last >= SNAPSHOT_EVERY_MS)
    }

    /// A snapshot of `rows` rows was written at `now_ms`.
    pub fn written(&mut self, rows: u64, now_ms: f64) {
        self.dirty = false;
        self.snapshots += 1;
        self.last_ms = Some(now_ms);
        self.rows_written += rows;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_takes_the_rate_and_sheds_the_rest() {
        let mut gate = PushLimiter::new(100.0);
        // Two seconds at 300 pushes/s: a burst of 100, then 100 a second.
        let taken = (0..600)
            .filter(|i| gate.try_take(f64::from(*i) * 1_000.0 / 300.0))
            .count();
        assert!((290..=310).contains(&taken), "took {taken}");
        assert_eq!(gate.shed, 600 - taken as u64);
        // Quiet for a second: the full burst again, no more.
        let later = (0..150).filter(|_| gate.try_take(3_000.0)).count();
        assert_eq!(later, 100);
    }

    #[test]
    fn snapshots_are_written_first_at_once_then_once_a_minute() {
        let mut s = SnapshotSchedule::default();
        assert!(!s.due(0.0), "nothing changed");
        for _ in 0..SNAPSHOT_AT_ONCE {
            assert!(s.changed(0.0));
            s.written(0, 0.0);
        }
        assert!(!s.changed(0.0));
        s.written(3, 0.0);
        assert!(!s.changed(1_000.0));
        assert!(!s.changed(59_999.0));
        assert!(s.due(60_000.0));
        s.written(3, 60_000.0);
        assert!(!s.due(200_000.0), "nothing changed since");
        assert_eq!(s.rows_written, 6);
    }

    #[test]
    fn a_woken_object_with_stored_state_waits_its_minute() {
        let mut s = SnapshotSchedule::resumed(1_000.0);
        assert!(!s.changed(1_000.0), "its stored state was written already");
        assert!(!s.changed(60_000.0));
        assert!(s.due(61_000.0));
    }
}
