//! The hedge delay by predicted benefit: from the measured latency of the
//! primary (X) and of the hedge target (Y), the delay `d` that makes the tail
//! of `min(X, d + Y)` shortest within the budget, and among delays within
//! 2% of the best, the latest (fewer hedges, less origin load).
//!
//! The tail is measured by one number that sees both p99 and what lies
//! beyond it: the mean of the slowest 1% (a p99 target alone would trade
//! p99.9 away). The budget bounds the share of requests still running at
//! `d`, `P(X > d)`, which is the share that gets a hedge. This is the idea of
//! SingleR (Kaler et al., SPAA 2017) and Kwiken (SIGCOMM 2013), restricted to
//! one hedge: a fixed quantile sits wherever the quantile falls, in or past
//! a cliff; this lands at the knee when there is one, and as late as the
//! tail allows when there is not.
//!
//! Samples cut short (censored) are known only to be slower than their
//! value: the distributions are Kaplan-Meier estimates, so the primaries a
//! hedge beat still count as slow.

use crate::estimation::sketch::LatencySketch;

/// The tail the objective averages: the slowest 1%.
const TAIL: f64 = 0.01;
/// Among delays as good on the slowest 1%, the tie is broken on the slowest
/// 2%, which also sees the band just under p99: when the slowest 1% is set by
/// requests no single hedge saves (slow on both legs, misses on both caches),
/// every delay looks alike on it. Measured in the simulator (120 s): p99 of
/// bimodal-cache 174 -> 164 ms, slow-origin 248 -> 237, at 1.8 and 2.3
/// points more hedges; heavy-tail and cliff unchanged.
const TIE_TAIL: f64 = 0.02;
/// Delays whose tail is within this share of the best count as as good.
const GOOD_ENOUGH: f64 = 0.02;
/// What a point of extra load must buy: every delay is scored on its tail
/// times `1 + LOAD_PRICE x share hedged`, so one more percent of requests
/// hedged must shorten the tail by about 1% or more. Without a price the
/// tail always improves a little more with the next point of the budget
/// (on a heavy tail, a lower delay keeps shortening the hedged spikes), and
/// the policy spent its whole budget where fixed p95 spent half for about
/// the same tail. Measured in the simulator (issue 40, 120 s, all
/// scenarios; price 0 / 1 / 2 / 3): heavy-tail 111.7 ms p99 at 9.3% /
/// 117.2 at 6.6% / 125.9 at 4.2% / 131.1 at 3.2%; rare-stalls p99.9 126.8 at
/// 8.4% (without the not-paying cut; 756 with it) / 148.1 at 2.9% / 164.6 at
/// 1.4% / 176.3 at 0.9%; every scenario's p99 within 5% of the hindsight
/// bound at its own load at 1 except cliff, gc-pause, overload-spell (as at
/// 0); at 2, shedding-tail's p99.9 fell back to 836.
const LOAD_PRICE: f64 = 1.0;

/// The delay chosen and what it is predicted to do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BenefitChoice {
    /// Milliseconds to wait before hedging.
    pub delay_ms: f64,
    /// Predicted share of requests that get a hedge, `P(X > d)`.
    pub hedge_share: f64,
    /// Predicted mean of this primary's part of the isolate's slowest 1%
    /// (its slowest `1% x tail_weight`) with this delay, ms.
    pub tail_ms: f64,
    /// The same without hedging, ms.
    pub unhedged_tail_ms: f64,
}

/// A distribution as ascending values, each with the probability of being
/// slower than it (`P(V > values[k])`).
#[derive(Debug, Clone)]
struct Steps {
    values: Vec<f64>,
    slower: Vec<f64>,
}

impl Steps {
    /// The sketch's Kaplan-Meier estimate ([`LatencySketch::kaplan_meier`]:
    /// the primaries a hedge beat still count as slow). What survives the
    /// last completion sits at the slowest time known: the last completion,
    /// or a later cut.
    ///
    /// At the latest cut, not at the last completion: when hedges win every
    /// spike (a +800 ms retransmit hedged at 100 ms is cut at ~140), no
    /// spike ever completes, and a tail put at the last completion (the
    /// fast mode's ~110 ms) looked short enough that hedging late seemed
    /// as good: a fresh Worker in workerd on heavy-tail held its delay at
    /// 100-107 ms (predicted hedge share 2-3%, predicted tail 103-118 ms)
    /// for 25 s, where one that had seen a spike complete chose 71.5 ms.
    fn of(sketch: &LatencySketch) -> Option<Self> {
        let km = sketch.kaplan_meier()?;
        let mut values = Vec::with_capacity(km.steps.len() + 1);
        let mut slower = Vec::with_capacity(km.steps.len() + 1);
        for &(value, share) in &km.steps {
            values.push(value);
            slower.push(share);
        }
        let last = *values.last()?;
        if km.unresolved() > 0.0 && km.slowest_ms > last {
            values.push(km.slowest_ms);
            slower.push(0.0);
        } else {
            *slower.last_mut()? = 0.0;
        }
        Some(Self { values, slower })
    }

    /// `P(V > t)`, by binary search.
    fn survival(&self, t: f64) -> f64 {
        match self.values.partition_point(|v| *v <= t) {
            0 => 1.0,
            k => self.slower[k - 1],
        }
    }
}

/// The mean of the slowest `tail` of `min(X, d + Y)` (`d` infinite: of X).
fn tail_mean(x: &Steps, y: &Steps, d: f64, tail: f64) -> f64 {
    // The support of min(X, d + Y) lies in X's values and d + Y's values:
    // walk both from the top down (a merge of two descending lists), adding
    // each point's mass until the slowest TAIL is covered.
    let survival = |t: f64| {
        if t < d {
            x.survival(t)
        } else {
            x.survival(t) * y.survival(t - d)
        }
    };
    let (mut i, mut j) = (
        x.values.len(),
        if d.is_finite() { y.values.len() } else { 0 },
    );
    let next = |i: &mut usize, j: &mut usize| -> Option<f64> {
        let a = i.checked_sub(1).map(|k| x.values[k]);
        let b = j.checked_sub(1).map(|k| d + y.values[k]);
        let top = match (a, b) {
            (Some(a), Some(b)) => a.max(b),
            (a, b) => a.or(b)?,
        };
        // Step past every copy of the top value on both sides.
        while *i > 0 && x.values[*i - 1] >= top {
            *i -= 1;
        }
        while *j > 0 && d + y.values[*j - 1] >= top {
            *j -= 1;
        }
        Some(top)
    };
    let mut taken = 0.0;
    let mut sum = 0.0;
    let mut point = next(&mut i, &mut j);
    while let Some(t) = point {
        let below = next(&mut i, &mut j);
        // Mass exactly at t: P(Z > t-) - P(Z > t), t- the next point down.
        let mass = (survival(below.unwrap_or(f64::NEG_INFINITY)) - survival(t)).max(0.0);
        let take = mass.min(tail - taken);
        sum += take * t;
        taken += take;
        if taken >= tail - 1e-12 {
            break;
        }
        point = below;
    }
    if taken <= 0.0 {
        0.0
    } else {
        sum / taken
    }
}

/// `P(V > t)` for the samples in `sketch` (Kaplan-Meier); `None` without any.
pub fn share_slower(sketch: &LatencySketch, t: f64) -> Option<f64> {
    Steps::of(sketch).map(|s| s.survival(t))
}

/// Whether the share of requests slower than a delay moved enough between
/// the whole window (`whole`) and its newest part (`recent`) to say the
/// window still remembers a spell that is over (or has not yet filled with
/// one that began): by half of the larger and at least a point.
pub fn shifted(whole: f64, recent: f64) -> bool {
    let moved = (recent - whole).abs();
    moved > whole.max(recent) / 2.0 && moved > 0.01
}

/// The delay for primary samples `primary` and hedge-target samples
/// `target`, hedging at most `max_hedge_share` of requests. `None` without
/// data in both.
///
/// `tail_weight` is how much of the isolate's slowest requests this
/// primary's requests hold for their number: 1 when they are as slow as
/// everyone's, more when its requests are the isolate's tail (a degraded
/// origin still serving some), less when they are faster. The objective is
/// the isolate's tail, not this primary's: the primary's share of it is its
/// slowest `TAIL x tail_weight`, and a hedge of its requests buys that much
/// more of the isolate's tail, so it costs `1 / tail_weight` as much and
/// may take `tail_weight` times the share (the budget holds over all
/// primaries, as their weights average 1 over the isolate's requests).
pub fn best_delay(
    primary: &LatencySketch,
    target: &LatencySketch,
    max_hedge_share: f64,
    tail_weight: f64,
) -> Option<BenefitChoice> {
    let x = Steps::of(primary)?;
    let y = Steps::of(target)?;
    let tail = (TAIL * tail_weight).min(0.5);
    let tie_tail = (TIE_TAIL * tail_weight).min(0.5);
    let max_hedge_share = (max_hedge_share * tail_weight).min(1.0);
    let unhedged_tail_ms = tail_mean(&x, &y, f64::INFINITY, tail);
    // Candidates: X's own values at which few enough requests still run.
    let price = |share: f64| 1.0 + LOAD_PRICE * share / tail_weight;
    let scored: Vec<(f64, f64, f64)> = (x.values.iter().zip(&x.slower))
        .filter(|(_, share)| **share <= max_hedge_share && **share > 0.0)
        .map(|(&d, &share)| (d, share, tail_mean(&x, &y, d, tail)))
        .collect();
    let best = scored.iter().map(|s| s.2 * price(s.1)).reduce(f64::min)?;
    let good: Vec<(f64, f64, f64, f64)> = scored
        .iter()
        .filter(|s| s.2 * price(s.1) <= best * (1.0 + GOOD_ENOUGH))
        .map(|&(d, share, tail)| {
            (
                d,
                share,
                tail,
                tail_mean(&x, &y, d, tie_tail) * price(share),
            )
        })
        .collect();
    let best_tie = good.iter().map(|s| s.3).reduce(f64::min)?;
    // Hedging must pay: otherwise the latest candidate (least load).
    let &(delay_ms, hedge_share, tail_ms, _) = good
        .iter()
        .filter(|s| s.3 <= best_tie * (1.0 + GOOD_ENOUGH))
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    Some(BenefitChoice {
        delay_ms,
        hedge_share,
        tail_ms,
        unhedged_tail_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimation::sketch::Sample;

    /// A sketch of `n` samples spread evenly over each (share, from, to) band.
    fn sketch(bands: &[(f64, f64, f64)], n: usize) -> LatencySketch {
        let mut s = LatencySketch::new();
        for &(share, from, to) in bands {
            let k = (share * n as f64) as usize;
            for i in 0..k {
                s.record(Sample::Completed(from + (to - from) * i as f64 / k as f64));
            }
        }
        s
    }

    #[test]
    fn a_moved_share_is_a_shift_noise_is_not() {
        assert!(shifted(0.10, 0.02)); // a spell left the window's tail
        assert!(shifted(0.08, 0.40)); // a spell began
        assert!(!shifted(0.08, 0.065)); // sampling noise
        assert!(!shifted(0.004, 0.012)); // tiny shares: under a point
        let x = sketch(&[(0.9, 20.0, 40.0), (0.1, 200.0, 300.0)], 2_000);
        let slower = share_slower(&x, 100.0).expect("data");
        assert!((slower - 0.1).abs() < 0.01, "{slower}");
        assert!(share_slower(&LatencySketch::new(), 1.0).is_none());
    }

    #[test]
    fn a_cliff_is_hedged_at_its_knee_not_at_a_quantile_inside_it() {
        // 90% at 20-40 ms, 10% at 200-300 ms; room for 12% of hedges.
        let x = sketch(&[(0.9, 20.0, 40.0), (0.1, 200.0, 300.0)], 2_000);
        let choice = best_delay(&x, &x, 0.12, 1.0).expect("data");
        assert!(
            choice.delay_ms >= 38.0 && choice.delay_ms <= 60.0,
            "{choice:?}"
        );
        // 1% of requests are slow on both legs, so the slowest 1% stays in
        // the cliff; the hedge still shortens it, and by more than a hedge
        // at p95, which sits inside the cliff.
        let steps = Steps::of(&x).expect("data");
        let at_p95 = tail_mean(&steps, &steps, 250.0, TAIL);
        assert!(choice.tail_ms < at_p95, "{choice:?} vs {at_p95}");
        assert!(choice.tail_ms < choice.unhedged_tail_ms, "{choice:?}");
    }

    #[test]
    fn rare_spikes_are_hedged_late_for_the_same_tail() {
        // 97% at 30-60 ms, 3% at +800: hedging anywhere before 800 ms cuts
        // the tail the same, so the latest such delay wins (fewest hedges).
        let x = sketch(&[(0.97, 30.0, 60.0), (0.03, 830.0, 860.0)], 4_000);
        let choice = best_delay(&x, &x, 0.12, 1.0).expect("data");
        assert!(choice.hedge_share <= 0.035, "{choice:?}");
        // Slowest 1%: 0.09% both spiked (~900 ms), the rest hedged (~120 ms).
        assert!(
            choice.tail_ms < 0.25 * choice.unhedged_tail_ms,
            "{choice:?}"
        );
    }

    #[test]
    fn spikes_every_hedge_cut_still_count_as_slow() {
        // 98% at 30-60 ms; 2% spikes, each hedged and cut at ~140 ms, none
        // completed. Put at the last completion (~60 ms), they looked no
        // slower than the fast mode and hedging them late looked as good.
        let mut x = sketch(&[(0.98, 30.0, 60.0)], 4_000);
        for i in 0..80 {
            x.record(Sample::Censored(130.0 + f64::from(i % 20)));
        }
        let choice = best_delay(&x, &x, 0.12, 1.0).expect("data");
        assert!(choice.unhedged_tail_ms >= 130.0, "{choice:?}");
        assert!(choice.delay_ms < 100.0, "{choice:?}");
    }

    #[test]
    fn the_budget_bounds_the_hedge_share() {
        let x = sketch(&[(0.8, 20.0, 40.0), (0.2, 200.0, 300.0)], 2_000);
        let choice = best_delay(&x, &x, 0.05, 1.0).expect("data");
        assert!(choice.hedge_share <= 0.05, "{choice:?}");
    }

    #[test]
    fn a_primary_holding_more_of_the_isolates_tail_is_hedged_earlier() {
        // A degraded primary (100-500 ms) hedged to a fast origin: on its own
        // slowest 1% and a tenth of its requests the hedge comes late; when
        // its requests hold four times their number of the isolate's tail,
        // its slowest 4% matter and it may take four times the share.
        let x = sketch(&[(1.0, 100.0, 500.0)], 4_000);
        let y = sketch(&[(1.0, 20.0, 60.0)], 4_000);
        let alone = best_delay(&x, &y, 0.1, 1.0).expect("data");
        let weighed = best_delay(&x, &y, 0.1, 4.0).expect("data");
        assert!(alone.hedge_share <= 0.1, "{alone:?}");
        assert!(
            weighed.delay_ms < alone.delay_ms,
            "{weighed:?} vs {alone:?}"
        );
        assert!(weighed.hedge_share > 0.1, "{weighed:?}");
        assert!(weighed.hedge_share <= 0.4, "{weighed:?}");
    }

    #[test]
    fn no_data_no_choice() {
        let x = sketch(&[(1.0, 20.0, 40.0)], 100);
        assert!(best_delay(&LatencySketch::new(), &x, 0.1, 1.0).is_none());
        assert!(best_delay(&x, &LatencySketch::new(), 0.1, 1.0).is_none());
    }
}
