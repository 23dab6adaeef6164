//! What the Hedger decides for a request before any origin is asked, and why
//! a hedge went out.

pub use crate::admission::hedge_gate::HedgeCause;
use crate::estimation::delay_policy::DelayChoice;
use crate::no_hedge::NoHedge;

/// The route a request runs under: the key its latency and counts are kept
/// under, and the route policy (`HEDGE_ROUTES` index) it matched, if any.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Route {
    /// The route key (a route policy's name, a `HEDGE_ROUTE_KEYS` prefix, or
    /// a label for the path).
    pub key: String,
    /// The route policy its requests run under.
    pub policy: Option<usize>,
}

impl Route {
    /// A route key under no route policy.
    pub fn key(key: &str) -> Self {
        Self {
            key: key.to_string(),
            policy: None,
        }
    }
}

/// What the Hedger decided for a request before any origin is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct RacePlan {
    /// Index of the primary origin.
    pub primary: usize,
    /// The route it runs under.
    pub route: Route,
    /// The hedge delay, or `None` when this request is never hedged.
    pub delay: Option<DelayChoice>,
    /// Why this request is never hedged, when it is not.
    pub no_hedge: Option<NoHedge>,
    /// Classic timeout-and-retry instead of a hedge (`HEDGE_MODE=retry`):
    /// the timer abandons the primary, and the retry is not charged.
    pub retry: bool,
    /// The second leg must go to another origin, never the primary's own
    /// (an idempotency-keyed request, any method but GET and HEAD).
    pub peer_only: bool,
    /// Before the hedge delay, look once at this time whether the primary's
    /// origin has stalled (tail-aware policy; `None`: the delay comes first).
    pub stall_check_ms: Option<f64>,
    /// Longest wait for an answer's headers, ms (the route's or the global).
    pub timeout_ms: f64,
}

impl RacePlan {
    /// When the race's timer first fires, ms after the start: the stall
    /// check, else the hedge delay; `None` without either.
    pub fn first_timer_ms(&self) -> Option<f64> {
        self.stall_check_ms.or(self.delay.map(|d| d.delay_ms))
    }
}
