//! Active health probes, run by the PoP aggregator from its alarm: what each
//! origin's probe path answered, and what that says about the origin. The
//! aggregator hands the verdicts to isolates in its push replies, so an
//! origin failing its probes takes no new primaries before users see errors,
//! and one whose probes pass again is back without a user request's trial.
//!
//! Rules: [`DOWN_AFTER`] failed probes in a row mark an origin down; one
//! passing probe marks it up. A verdict older than [`STALE_AFTER_PROBES`]
//! intervals is not handed out (the aggregator stopped probing: isolates go
//! back to passive health alone).

use crate::vec_map::VecMap;

use serde::{Deserialize, Serialize};

/// Failed probes in a row that mark an origin down.
pub const DOWN_AFTER: u32 = 2;
/// Intervals after which a verdict is no longer handed out.
pub const STALE_AFTER_PROBES: f64 = 3.0;

/// The probes' settings (`HEDGE_PROBE_PATH` and its `HEDGE_TUNING` fields).
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeParams {
    /// The path probed on every origin; `None`: no probes.
    pub path: Option<String>,
    /// Time between probe rounds.
    pub interval_ms: f64,
    /// Longest wait for a probe's answer.
    pub timeout_ms: f64,
}

/// One origin's verdict, as a reply carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeVerdict {
    /// Origin name.
    pub origin: String,
    /// Passing (`true`) or failing its probes.
    pub up: bool,
}

/// What one probe got.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ProbeResult {
    /// A 2xx or 3xx answer.
    Pass,
    /// Any other status, a connection error or no answer within the timeout.
    Fail,
}

/// Whether a probe's answer passes: 2xx and 3xx do.
pub fn judge(status: Option<u16>) -> ProbeResult {
    match status {
        Some(200..=399) => ProbeResult::Pass,
        _ => ProbeResult::Fail,
    }
}

/// One origin's probe history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeRecord {
    /// The verdict, once there is one.
    pub up: Option<bool>,
    /// Failed probes in a row.
    pub failing_in_a_row: u32,
    /// Probes that passed and failed, since the aggregator started.
    pub passed: u64,
    /// Probes that failed.
    pub failed: u64,
    /// When the last probe's result arrived.
    pub last_ms: Option<f64>,
    /// How long the last probe took, ms.
    pub last_latency_ms: Option<f64>,
}

/// Every origin's probe history.
#[derive(Debug, Clone, Default)]
pub struct ProbeBook {
    records: VecMap<String, ProbeRecord>,
    last_round_ms: Option<f64>,
}

impl ProbeBook {
    /// Whether a round of probes is due at `now_ms`.
    pub fn due(&self, params: &ProbeParams, now_ms: f64) -> bool {
        params.path.is_some()
            && self
                .last_round_ms
                .is_none_or(|t| now_ms - t >= params.interval_ms)
    }

    /// A round starts at `now_ms`.
    pub fn round_started(&mut self, now_ms: f64) {
        self.last_round_ms = Some(now_ms);
    }

    /// Records what a probe of `origin` got, `latency_ms` after it was sent.
    pub fn record(&mut self, origin: &str, result: ProbeResult, latency_ms: f64, now_ms: f64) {
        if !self.records.contains_key(origin) {
            self.records
                .insert(origin.to_string(), ProbeRecord::default());
        }
        let Some(r) = self.records.get_mut(origin) else {
            return;
        };
        r.last_ms = Some(now_ms);
        r.last_latency_ms = Some(latency_ms);
        match result {
            ProbeResult::Pass => {
                r.passed += 1;
                r.failing_in_a_row = 0;
                r.up = Some(true);
            }
            ProbeResult::Fail => {
                r.failed += 1;
                r.failing_in_a_row += 1;
                if r.failing_in_a_row >= DOWN_AFTER {
                    r.up = Some(false);
                }
            }
        }
    }

    /// The fresh verdicts at `now_ms` (for the replies).
    pub fn verdicts(&self, params: &ProbeParams, now_ms: f64) -> Vec<ProbeVerdict> {
        let fresh_ms = STALE_AFTER_PROBES * params.interval_ms + params.timeout_ms;
        self.records
            .iter()
            .filter(|(_, r)| r.last_ms.is_some_and(|t| now_ms - t <= fresh_ms))
            .filter_map(|(origin, r)| {
                r.up.map(|up| ProbeVerdict {
                    origin: origin.clone(),
                    up,
                })
            })
            .collect()
    }

    /// Every origin's record (for the metrics).
    pub fn records(&self) -> impl Iterator<Item = (&String, &ProbeRecord)> {
        self.records.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> ProbeParams {
        ProbeParams {
            path: Some("/health".into()),
            interval_ms: 1_000.0,
            timeout_ms: 500.0,
        }
    }

    #[test]
    fn two_failures_in_a_row_mark_down_and_one_pass_marks_up() {
        let p = params();
        let mut book = ProbeBook::default();
        book.record("a", ProbeResult::Fail, 500.0, 0.0);
        assert!(
            book.verdicts(&p, 0.0).is_empty(),
            "one failure says nothing yet"
        );
        book.record("a", ProbeResult::Fail, 500.0, 1_000.0);
        assert_eq!(
            book.verdicts(&p, 1_000.0),
            vec![ProbeVerdict {
                origin: "a".into(),
                up: false
            }]
        );
        book.record("a", ProbeResult::Pass, 3.0, 2_000.0);
        assert_eq!(
            book.verdicts(&p, 2_000.0),
            vec![ProbeVerdict {
                origin: "a".into(),
                up: true
            }]
        );
        book.record("a", ProbeResult::Fail, 500.0, 3_000.0);
        assert!(
            book.verdicts(&p, 3_000.0)[0].up,
            "a single failure keeps it up"
        );
    }

    #[test]
    fn an_old_verdict_is_not_handed_out() {
        let p = params();
        let mut book = ProbeBook::default();
        book.record("a", ProbeResult::Pass, 3.0, 0.0);
        assert_eq!(book.verdicts(&p, 3_500.0).len(), 1);
        assert!(book.verdicts(&p, 3_600.0).is_empty());
    }

    #[test]
    fn rounds_are_due_by_the_interval_and_never_without_a_path() {
        let mut p = params();
        let mut book = ProbeBook::default();
        assert!(book.due(&p, 0.0));
        book.round_started(0.0);
        assert!(!book.due(&p, 999.0));
        assert!(book.due(&p, 1_000.0));
        p.path = None;
        assert!(!book.due(&p, 5_000.0));
    }

    #[test]
    fn only_2xx_and_3xx_pass() {
        assert_eq!(judge(Some(200)), ProbeResult::Pass);
        assert_eq!(judge(Some(304)), ProbeResult::Pass);
        for failing in [Some(404), Some(500), Some(503), None] {
            assert_eq!(judge(failing), ProbeResult::Fail);
        }
    }
}
