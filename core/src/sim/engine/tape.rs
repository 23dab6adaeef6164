//! What a run leaves for the hindsight bound to replay: each measured
//! request's arrival, primary and the Worker's own time, and the origins'
//! queues as the run's legs met them.

/// What a replay of a run under another policy needs of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tape {
    /// Every measured request, in the order its race ended.
    pub requests: Vec<TapeEntry>,
    /// For each origin with a worker limit, every leg that ran there
    /// (warm-up included), in the order it arrived: (arrival ms, how long it
    /// queued before it ran, ms); empty for an origin that never queues. A
    /// leg the replay sends where the run sent none meets the queue the
    /// run's legs met at that moment.
    pub queue_waits: Vec<Vec<(f64, f64)>>,
}

impl Tape {
    /// How long a leg reaching `origin` at `at_ms` waits: as long as the
    /// last leg of the run to reach it before then (0 before the first).
    pub fn queue_wait(&self, origin: usize, at_ms: f64) -> f64 {
        let Some(waits) = self.queue_waits.get(origin) else {
            return 0.0;
        };
        match waits.partition_point(|&(arrived, _)| arrived <= at_ms) {
            0 => 0.0,
            k => waits[k - 1].1,
        }
    }
}

/// One measured request as the run served it: what a replay under another
/// policy needs to meet the same arrival, primary, origin draws and the
/// Worker's own time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TapeEntry {
    /// The request's index (the key of its origin draws).
    pub req: u32,
    /// The origin its primary went to.
    pub primary: u8,
    /// When the primary was sent, ms.
    pub sent_ms: f64,
    /// How long the primary queued at its origin before it ran, ms (until
    /// it was aborted, if it never ran).
    pub primary_wait_ms: f64,
    /// The client's latency less the time from the primary's send to the
    /// kept answer: the Worker's own time (its overhead and loop waits).
    pub overhead_ms: f64,
}
