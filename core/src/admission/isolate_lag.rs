//! How late the isolate's own event loop runs, which is not the origin's doing.
//!
//! A race's hedge timer that was due at `t` and fires at `t + lag` says the
//! isolate was busy for `lag` (its CPU, the events queued before it). An
//! origin's answer waits the same way before the race sees it, so a leg's
//! measured latency is the origin's part plus the isolate's. A hedge cannot
//! shorten the isolate's part; it adds work to it. So while the isolate is
//! the bottleneck the Hedger sends no hedge for a slow primary
//! (`isolate-busy`), and the latency it learns from is the measured latency
//! less the current mean lag.
//!
//! Busy means a good share of recent timers (over a third) ran late by the
//! busy level or more, not that the mean lag did: a lone pause (a garbage collection, the machine
//! scheduling another process) makes a few timers very late and would drag
//! a mean over the level while the isolate is mostly idle (measured in the
//! lab at 200 rps: single lags of 40-100 ms, a mean lag under 1 ms).
//!
//! Both figures decay toward zero between samples (half-life
//! [`HALF_LIFE_MS`]): an isolate that has gone quiet is not busy.

/// A sample moves the mean and the late share by this share of the difference.
const SAMPLE_WEIGHT: f64 = 0.1;
/// A lag counts toward the mean lag up to this much (a lone long pause is
/// not every answer's).
const MEAN_CLIP_MS: f64 = 50.0;
/// Busy from this share of recent timers late by the busy level ...
const BUSY_LATE_SHARE: f64 = 0.35;
/// ... and idle again below this one.
const IDLE_LATE_SHARE: f64 = 0.2;
/// Without samples the mean halves this often.
pub const HALF_LIFE_MS: f64 = 1_000.0;

/// The isolate's recent event-loop lag.
#[derive(Debug, Clone)]
pub struct IsolateLag {
    /// The lag from which the isolate counts as busy, ms; 0 turns the rule off.
    busy_ms: f64,
    mean_ms: f64,
    late_share: f64,
    at_ms: f64,
    busy: bool,
    samples: u64,
    max_ms: f64,
}

impl IsolateLag {
    /// A tracker that calls the isolate busy from `busy_ms` of mean lag
    /// (and idle again below half of it); `busy_ms` 0: never busy.
    pub fn new(busy_ms: f64) -> Self {
        Self {
            busy_ms,
            mean_ms: 0.0,
            late_share: 0.0,
            at_ms: f64::NEG_INFINITY,
            busy: false,
            samples: 0,
            max_ms: 0.0,
        }
    }

    /// A timer due at `due_ms` ran at `now_ms`.
    pub fn timer_ran(&mut self, due_ms: f64, now_ms: f64) {
        let lag = now_ms - due_ms;
        if !lag.is_finite() {
            return;
        }
        let lag = lag.max(0.0);
        let mean = self.mean_ms(now_ms);
        self.mean_ms = mean + SAMPLE_WEIGHT * (lag.min(MEAN_CLIP_MS) - mean);
        let late = if self.busy_ms > 0.0 && lag >= self.busy_ms {
            1.0
        } else {
            0.0
        };
        let share = self.late_share(now_ms);
        self.late_share = share + SAMPLE_WEIGHT * (late - share);
        self.at_ms = now_ms;
        self.samples += 1;
        self.max_ms = self.max_ms.max(lag);
    }

    /// The recent mean lag at `now_ms`, ms.
    pub fn mean_ms(&self, now_ms: f64) -> f64 {
        self.mean_ms * self.decay(now_ms)
    }

    /// The recent share of timers late by the busy level or more.
    pub fn late_share(&self, now_ms: f64) -> f64 {
        self.late_share * self.decay(now_ms)
    }

    fn decay(&self, now_ms: f64) -> f64 {
        let since = now_ms - self.at_ms;
        if !since.is_finite() {
            return 0.0;
        }
        0.5f64.powf(since.max(0.0) / HALF_LIFE_MS)
    }

    /// Whether the isolate is the bottleneck now: 35% of the recent timers
    /// ran late by the busy level, and not yet fewer than 20% again
    /// (hysteresis, so hedging does not flap at the edge).
    pub fn busy(&mut self, now_ms: f64) -> bool {
        if self.busy_ms <= 0.0 {
            return false;
        }
        let share = self.late_share(now_ms);
        self.busy = if self.busy {
            share >= IDLE_LATE_SHARE
        } else {
            share >= BUSY_LATE_SHARE
        };
        self.busy
    }

    /// Whether the last look found it busy (without updating it).
    pub fn was_busy(&self) -> bool {
        self.busy
    }

    /// The part of a leg's `elapsed_ms` its origin caused: less the lag
    /// the isolate adds to every answer now (never below zero).
    pub fn origin_part(&self, elapsed_ms: f64, now_ms: f64) -> f64 {
        (elapsed_ms - self.mean_ms(now_ms)).max(0.0)
    }

    /// Timers measured so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The largest lag seen, ms.
    pub fn max_ms(&self) -> f64 {
        self.max_ms
    }

    /// The busy level, ms (0: off).
    pub fn busy_ms(&self) -> f64 {
        self.busy_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_isolate_is_never_busy() {
        let mut lag = IsolateLag::new(5.0);
        assert!(!lag.busy(0.0));
        for i in 0..100 {
            let t = f64::from(i) * 10.0;
            lag.timer_ran(t, t + 0.5);
        }
        assert!(!lag.busy(1_000.0));
        assert!(lag.mean_ms(1_000.0) < 1.0);
    }

    #[test]
    fn late_timers_make_it_busy_and_it_recovers_with_hysteresis() {
        let mut lag = IsolateLag::new(5.0);
        let mut t = 0.0;
        while !lag.busy(t) {
            lag.timer_ran(t, t + 20.0);
            t += 10.0;
            assert!(t < 1_000.0, "never busy");
        }
        // Some timers on time again, but not yet four in five: still busy.
        for _ in 0..6 {
            lag.timer_ran(t, t);
            t += 1.0;
        }
        assert!(lag.late_share(t) < 0.35 && lag.late_share(t) > 0.2);
        assert!(lag.busy(t));
        // Quiet for a few half-lives: idle again.
        assert!(!lag.busy(t + 3.0 * HALF_LIFE_MS));
    }

    #[test]
    fn lone_long_pauses_do_not_make_an_idle_isolate_busy() {
        // One timer in 20 is 60 ms late (a GC pause), the rest on time.
        let mut lag = IsolateLag::new(3.0);
        for i in 0..400 {
            let t = f64::from(i) * 5.0;
            let late = if i % 20 == 0 { 60.0 } else { 0.2 };
            lag.timer_ran(t, t + late);
            assert!(!lag.busy(t + late), "busy at timer {i}");
        }
    }

    #[test]
    fn the_origin_part_is_the_latency_less_the_lag() {
        let mut lag = IsolateLag::new(0.0);
        for i in 0..200 {
            let t = f64::from(i);
            lag.timer_ran(t, t + 10.0);
        }
        let part = lag.origin_part(50.0, 200.0);
        assert!((part - 40.0).abs() < 0.5, "{part}");
        assert_eq!(lag.origin_part(3.0, 200.0), 0.0);
        assert!(!lag.busy(200.0), "0 turns the busy rule off");
    }

    #[test]
    fn a_clock_that_goes_backwards_counts_as_no_lag() {
        let mut lag = IsolateLag::new(5.0);
        lag.timer_ran(100.0, 90.0);
        assert_eq!(lag.mean_ms(100.0), 0.0);
        lag.timer_ran(f64::NAN, 100.0);
        assert_eq!(lag.samples(), 1);
    }
}
