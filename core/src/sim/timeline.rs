//! What a run did second by second, so a spell (an overload, a sick origin)
//! can be read before, during and after: how soon hedging and an origin's
//! share of primaries come back once it ends.

use super::percentile::percentile;

/// One second of measured arrivals.
#[derive(Debug, Clone, Default, PartialEq)]
struct Second {
    /// Requests that arrived in it.
    requests: u64,
    /// Of them, hedged.
    hedges: u64,
    /// Their primaries, by origin.
    primaries: Vec<u64>,
    /// Their latencies, ms.
    latencies_ms: Vec<f64>,
}

/// A run's measured seconds, by arrival time (second 0 is the first measured one).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    seconds: Vec<Second>,
    origins: usize,
}

/// Several seconds together.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// First second (measured time).
    pub from_s: usize,
    /// Requests.
    pub requests: u64,
    /// Hedged requests, % of requests.
    pub hedge_pct: f64,
    /// Primaries by origin, % of requests.
    pub primary_pct: Vec<f64>,
    /// p99 latency, ms.
    pub p99: f64,
}

impl Timeline {
    /// An empty timeline over `origins` origins.
    pub fn new(origins: usize) -> Self {
        Self {
            seconds: Vec::new(),
            origins,
        }
    }

    /// Books one finished request that arrived `arrived_s` seconds into the
    /// measured time.
    pub fn record(&mut self, arrived_s: f64, latency_ms: f64, hedged: bool, primary: usize) {
        let i = arrived_s.max(0.0) as usize;
        while self.seconds.len() <= i {
            self.seconds.push(Second {
                primaries: vec![0; self.origins],
                ..Second::default()
            });
        }
        let s = &mut self.seconds[i];
        s.requests += 1;
        s.hedges += u64::from(hedged);
        if let Some(n) = s.primaries.get_mut(primary) {
            *n += 1;
        }
        s.latencies_ms.push(latency_ms);
    }

    /// Seconds `[from_s, until_s)` together (`None` if none has requests).
    pub fn block(&self, from_s: usize, until_s: usize) -> Option<Block> {
        let span = self.seconds.get(from_s..until_s.min(self.seconds.len()))?;
        let requests: u64 = span.iter().map(|s| s.requests).sum();
        if requests == 0 {
            return None;
        }
        let pct = |n: u64| 100.0 * n as f64 / requests as f64;
        let mut latencies: Vec<f64> = span.iter().flat_map(|s| s.latencies_ms.clone()).collect();
        Some(Block {
            from_s,
            requests,
            hedge_pct: pct(span.iter().map(|s| s.hedges).sum()),
            primary_pct: (0..self.origins)
                .map(|o| pct(span.iter().map(|s| s.primaries[o]).sum()))
                .collect(),
            p99: percentile(&mut latencies, 0.99),
        })
    }

    /// Consecutive blocks of `width_s` seconds.
    pub fn blocks(&self, width_s: usize) -> Vec<Block> {
        let width = width_s.max(1);
        (0..self.seconds.len())
            .step_by(width)
            .filter_map(|from| self.block(from, from + width))
            .collect()
    }

    /// Seconds after `end_s` until `metric` over a `width_s`-second block is
    /// back to `share` (0-1) of its level before the spell (`[0, start_s)`):
    /// the first block start t >= end_s whose value reaches it, as t - end_s.
    /// `None`: it never came back within the run, or there was no level.
    pub fn back_after(
        &self,
        start_s: usize,
        end_s: usize,
        width_s: usize,
        share: f64,
        metric: impl Fn(&Block) -> f64,
    ) -> Option<usize> {
        let width = width_s.max(1);
        let before = metric(&self.block(0, start_s)?);
        if before <= 0.0 {
            return None;
        }
        (end_s..self.seconds.len().saturating_sub(width - 1))
            .find(|&t| {
                self.block(t, t + width)
                    .is_some_and(|b| metric(&b) >= share * before)
            })
            .map(|t| t - end_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10 requests a second for 40 s; one in ten hedged, except in the
    /// spell (seconds 10-19, primaries on origin 1) and the 3 s after it.
    fn spell() -> Timeline {
        let mut t = Timeline::new(2);
        for s in 0..40 {
            for k in 0..10 {
                let hedged = k == 0 && !(10..23).contains(&s);
                let primary = usize::from((10..20).contains(&s));
                t.record(f64::from(s) + 0.05 * f64::from(k), 40.0, hedged, primary);
            }
        }
        t
    }

    #[test]
    fn blocks_sum_their_seconds() {
        let t = spell();
        let b = t.blocks(10);
        assert_eq!(b.len(), 4);
        assert_eq!(b[0].requests, 100);
        assert!((b[0].hedge_pct - 10.0).abs() < 1e-9);
        assert_eq!(b[1].hedge_pct, 0.0);
        assert_eq!(b[1].primary_pct, vec![0.0, 100.0]);
        assert_eq!(b[0].p99, 40.0);
    }

    #[test]
    fn back_after_finds_the_first_block_at_the_old_level() {
        let t = spell();
        // Hedging: 10% before; one-second blocks are back from second 23.
        assert_eq!(t.back_after(10, 20, 1, 0.9, |b| b.hedge_pct), Some(3));
        // Five-second blocks: [22, 27) has 8%, [23, 28) 10%.
        assert_eq!(t.back_after(10, 20, 5, 0.9, |b| b.hedge_pct), Some(3));
        // The primaries of origin 0 are back at once.
        assert_eq!(t.back_after(10, 20, 5, 0.9, |b| b.primary_pct[0]), Some(0));
        // Never back: a level nothing reaches.
        assert_eq!(t.back_after(10, 20, 5, 2.0, |b| b.hedge_pct), None);
        // A zero width counts as one second.
        assert_eq!(t.back_after(10, 20, 0, 0.9, |b| b.hedge_pct), Some(3));
    }
}
