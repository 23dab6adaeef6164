//! Why a request got no hedge: one enum from the decision to `Server-Timing`,
//! the log line and the stats, so a reason has one name everywhere.

use crate::request::eligibility::NotHedgeableReason;

/// Why no hedge went out for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoHedge {
    /// The request may not be sent twice (method, body, upgrade).
    NotEligible(NotHedgeableReason),
    /// Hedging is off (`HEDGE_MODE=off`).
    Off,
    /// A hedge was wanted when the delay ran out (or after a fast failure)
    /// but the gate refused it.
    Denied(HedgeDenied),
}

impl NoHedge {
    /// The name used in `Server-Timing` (`hedge-skip;desc=...`), logs and stats.
    pub fn as_str(&self) -> &'static str {
        match self {
            NoHedge::NotEligible(reason) => reason.as_str(),
            NoHedge::Off => "off",
            NoHedge::Denied(denied) => denied.as_str(),
        }
    }
}

/// Why the hedge gate refused a hedge that was wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HedgeDenied {
    /// The global budget has no token.
    Budget,
    /// The primary's 5xx rate is past the stop level.
    PrimaryErroring,
    /// No origin may take the hedge (and same-origin hedges are off).
    NoTarget,
    /// The isolate's own event loop is the bottleneck: a hedge would add
    /// work to it and cannot shorten it.
    IsolateBusy,
    /// Hedges of this cause to this origin have stopped winning as often
    /// as predicted; this one was left out to cut them back.
    NotPaying,
    /// The PoP as a whole (or the route's own PoP share) is over its
    /// budget: no straggler or stall hedges until it is back under. A fast
    /// failure's retry still goes (it replaces a request).
    PopBudget,
}

impl HedgeDenied {
    /// A short name for headers and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            HedgeDenied::Budget => "budget",
            HedgeDenied::PrimaryErroring => "primary-erroring",
            HedgeDenied::NoTarget => "no-target",
            HedgeDenied::IsolateBusy => "isolate-busy",
            HedgeDenied::NotPaying => "not-paying",
            HedgeDenied::PopBudget => "pop-budget",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_one_distinct_name() {
        let all = [
            NoHedge::NotEligible(NotHedgeableReason::NotIdempotent),
            NoHedge::NotEligible(NotHedgeableReason::BodyTooLarge),
            NoHedge::NotEligible(NotHedgeableReason::Upgrade),
            NoHedge::NotEligible(NotHedgeableReason::HeldBodiesFull),
            NoHedge::NotEligible(NotHedgeableReason::MethodOverride),
            NoHedge::Off,
            NoHedge::Denied(HedgeDenied::Budget),
            NoHedge::Denied(HedgeDenied::PrimaryErroring),
            NoHedge::Denied(HedgeDenied::NoTarget),
            NoHedge::Denied(HedgeDenied::IsolateBusy),
            NoHedge::Denied(HedgeDenied::NotPaying),
            NoHedge::Denied(HedgeDenied::PopBudget),
        ];
        let mut names: Vec<&str> = all.iter().map(NoHedge::as_str).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len(), "{names:?}");
        // One spelling: lower case words joined by '-'.
        for name in names {
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
                "{name}"
            );
        }
    }
}
