//! The isolate's cap on the billed events a failing request writes: its
//! error log line and its unsampled Analytics Engine point.
//!
//! Every 5xx used to write both, without a bound, and a client can cause
//! 5xx answers at will (a flood of requests to a path whose origin fails):
//! each line is Workers Logs volume and each point costs about what a
//! request does. So each isolate writes at most [`ERROR_EVENTS_PER_MINUTE`]
//! of each (a token bucket, full at start). Past that, a line is left out
//! and counted (the next line written says how many were), and a point
//! falls back to the sample the successful requests use, weighted, so a
//! query summing the weights still counts every 5xx.

use super::request_log::{analytics_weight, LogLevel};

/// Error lines, and unsampled points, an isolate writes per minute at most
/// (each a burst at most as large).
pub const ERROR_EVENTS_PER_MINUTE: f64 = 60.0;

/// The share of 5xx points written past the cap when successes are not
/// sampled at all (`HEDGE_ANALYTICS_SAMPLE_PERCENT=0`).
const OVER_CAP_SAMPLE_PERCENT: f64 = 1.0;

/// What one finished request writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Billed {
    /// Its log line is written.
    pub log: bool,
    /// Error lines left out since the last one written (carried by this
    /// one when it is written).
    pub lines_left_out: u64,
    /// Its data point's weight, when one is written.
    pub weight: Option<f64>,
}

/// The isolate's two allowances and the lines it left out.
#[derive(Debug, Clone)]
pub struct ErrorEvents {
    lines: Allowance,
    points: Allowance,
    lines_left_out: u64,
}

impl ErrorEvents {
    /// Both allowances full at `now_ms`.
    pub fn new(now_ms: f64) -> Self {
        Self {
            lines: Allowance::full(now_ms),
            points: Allowance::full(now_ms),
            lines_left_out: 0,
        }
    }

    /// What a request answered `status` writes at `now_ms`: its line at
    /// `level`, its point (with a dataset bound) at `sample_percent` of
    /// successes, `draw` uniform in [0, 1).
    pub fn bill(
        &mut self,
        status: u16,
        level: LogLevel,
        dataset: bool,
        sample_percent: f64,
        draw: f64,
        now_ms: f64,
    ) -> Billed {
        let wants_line = level.logs(status);
        if status < 500 {
            return Billed {
                log: wants_line,
                lines_left_out: 0,
                weight: dataset
                    .then(|| analytics_weight(status, sample_percent, draw))
                    .flatten(),
            };
        }
        let log = wants_line && self.lines.take(now_ms);
        let lines_left_out = match (wants_line, log) {
            (true, true) => std::mem::take(&mut self.lines_left_out),
            (true, false) => {
                self.lines_left_out += 1;
                0
            }
            (false, _) => 0,
        };
        let weight = match dataset {
            false => None,
            true if self.points.take(now_ms) => Some(1.0),
            // Past the cap a 5xx is sampled like a success (status 200 here
            // only selects the sampled rule), weighted to stand for the rest.
            true => analytics_weight(200, sample_percent.max(OVER_CAP_SAMPLE_PERCENT), draw),
        };
        Billed {
            log,
            lines_left_out,
            weight,
        }
    }
}

/// A token bucket of [`ERROR_EVENTS_PER_MINUTE`].
#[derive(Debug, Clone)]
struct Allowance {
    tokens: f64,
    at_ms: f64,
}

impl Allowance {
    fn full(now_ms: f64) -> Self {
        Self {
            tokens: ERROR_EVENTS_PER_MINUTE,
            at_ms: now_ms,
        }
    }

    fn take(&mut self, now_ms: f64) -> bool {
        let elapsed = (now_ms - self.at_ms).max(0.0);
        self.at_ms = self.at_ms.max(now_ms);
        let per_ms = ERROR_EVENTS_PER_MINUTE / 60_000.0;
        self.tokens = (self.tokens + elapsed * per_ms).min(ERROR_EVENTS_PER_MINUTE);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_5xx_flood_writes_at_most_the_cap_and_the_next_line_counts_the_rest() {
        let mut events = ErrorEvents::new(0.0);
        let mut lines = 0;
        for i in 0..200 {
            let billed = events.bill(502, LogLevel::Error, true, 1.0, 0.5, f64::from(i));
            lines += u64::from(billed.log);
        }
        assert_eq!(
            lines, 60,
            "a burst of the cap, then nothing within the second"
        );
        // A minute later the allowance is back; the first line carries the count.
        let next = events.bill(502, LogLevel::Error, true, 1.0, 0.5, 60_200.0);
        assert!(next.log);
        assert_eq!(next.lines_left_out, 140);
        let after = events.bill(502, LogLevel::Error, true, 1.0, 0.5, 60_300.0);
        assert_eq!(after.lines_left_out, 0);
    }

    #[test]
    fn points_past_the_cap_are_sampled_and_their_weights_still_count_every_5xx() {
        let mut events = ErrorEvents::new(0.0);
        let n = 100_000;
        let total: f64 = (0..n)
            .filter_map(|i| {
                let draw = f64::from(i % 1000) / 1000.0;
                // All within one second: the cap's 60, then the 1% sample.
                events.bill(503, LogLevel::Off, true, 1.0, draw, 0.5).weight
            })
            .sum();
        let written = f64::from(n);
        assert!(
            (total - written).abs() / written < 0.01,
            "weights sum to {total}"
        );
        // No dataset: nothing written, nothing taken from the allowance.
        assert_eq!(
            events.bill(503, LogLevel::Off, false, 1.0, 0.0, 0.5).weight,
            None
        );
    }

    #[test]
    fn successes_are_not_capped() {
        let mut events = ErrorEvents::new(0.0);
        for _ in 0..1_000 {
            let billed = events.bill(200, LogLevel::Info, true, 100.0, 0.3, 0.0);
            assert!(billed.log);
            assert_eq!(billed.weight, Some(1.0));
        }
    }
}
