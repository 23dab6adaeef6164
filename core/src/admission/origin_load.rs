//! What each origin is doing right now, as this isolate sees it: its legs in
//! flight, when it last answered, a fast-moving latency average and its share
//! of failed answers. Two decisions read it:
//!
//! - **The primary** (`HEDGE_PRIMARY=latency`): drawn at random with weight
//!   `1 / latency^4`, where an origin's latency is inflated by its failure
//!   share (a fast 503 must make an origin look worse, not faster). Equal
//!   origins split the primaries evenly (no herding, and queueing origins
//!   share the load); an origin three times slower gets ~1%. Every origin
//!   keeps a probe share so a recovery is seen. (Prequal, NSDI 2024, and C3,
//!   NSDI 2015, choose by latency and load the same way; the in-flight count
//!   is left to the latency average, which rises when an origin queues.)
//! - **Stalls**: an origin with several legs in flight, none of which has
//!   answered for `stall_factor` times its usual latency while no other leg
//!   answered either, may have stopped the world. The silence is also at
//!   least four of the origin's usual gaps between answers (where an isolate
//!   sees few answers, a quiet spell is not news), and the origin's own
//!   recent spread of answers must make it unlikely: the chance that every
//!   leg in flight stays unanswered through its part of the silence, as the
//!   origin usually answers, under 0.1%. A run of cache misses on a two-mode
//!   origin is explained by its slow mode; a stop-the-world pause, which
//!   holds the fast answers too, is not. Its aged requests are hedged at
//!   once and new primaries go elsewhere until it answers again.
//!
//! - **Headroom**: an origin whose fast answers have slowed to twice their
//!   baseline is queueing: it gets no hedges until it is back under 1.5x
//!   (hysteresis), so hedging never feeds an overload. "Fast answers" is a
//!   running estimate of its 25th percentile: a queue delays every request,
//!   the fast ones too, while stragglers, stalls and a slow minority (what
//!   hedging is for) leave it alone. The baseline is the lowest it has been
//!   lately, allowed to drift up by at most 2x a minute. Only hedges stop;
//!   primaries follow the latency weights.
//!
//! Legs are tracked by id with their start time and forgotten after the
//! request timeout, so a request whose events never arrive (the runtime
//! dropped it) cannot leave an origin looking busy forever.

use super::answer_shape::AnswerShape;
use crate::vec_map::VecMap;

/// Settings for [`OriginLoad`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OriginLoadParams {
    /// Choose primaries by latency (else the first admitted in configuration order).
    pub by_latency: bool,
    /// Share of primaries each origin keeps whatever its latency, 0 to 1.
    pub probe_share: f64,
    /// A stall is this many times an origin's usual latency without an
    /// answer (0: stall detection off).
    pub stall_factor: f64,
    /// The shortest silence that can be a stall, ms.
    pub stall_min_ms: f64,
    /// A leg unreported for this long is forgotten (the request timeout).
    pub leg_expiry_ms: f64,
    /// Withhold hedges from queueing origins (the overload governor).
    pub governor: bool,
}

/// Weight of a new answer in the latency and failure averages (about the
/// last 20 answers).
const EWMA_WEIGHT: f64 = 0.05;
/// One answer moves the latency average by at most this factor's worth: a
/// +800 ms straggler is news about the tail, not about the typical latency.
const LATENCY_CLIP: f64 = 3.0;
/// How much a failure share inflates an origin's latency for the choice: at
/// 5% failures it looks 1.5 times slower.
const FAILURE_PENALTY: f64 = 10.0;
/// Legs in flight before a silence can be a stall.
const STALL_MIN_IN_FLIGHT: usize = 2;
/// A stall's silence is at least this many usual gaps between answers (a
/// Poisson stream stays this quiet by chance 2% of the time). Measured in the
/// simulator: 5 gaps left a PoP's isolates (each with a share of the
/// traffic, so longer gaps) a third slower on GC stalls than one isolate;
/// 3 gaps mistook lined-up cache misses for stalls (bimodal-cache p99 +12%).
const STALL_MIN_GAPS: f64 = 4.0;

/// A silence is a stall only when an origin answering as usual would stay
/// this quiet with these legs in flight less often than this. Measured in
/// the simulator (medians of seeds 1 to 4, 60 s, 4 routes): 1% and 0.01%
/// each left gc-pause or bimodal-cache further from the hindsight bound.
const STALL_CHANCE: f64 = 1e-3;
/// Answers before that chance is read from the origin's own spread (until
/// then the silence alone decides).
const SHAPE_MIN_ANSWERS: f64 = 50.0;

/// Latency over baseline at which an origin counts as queueing...
const QUEUEING_ABOVE: f64 = 2.0;
/// ...and below which it has headroom again.
const HEADROOM_BELOW: f64 = 1.5;
/// The baseline may rise by this factor per minute (a lasting change of
/// latency becomes the new normal; an overload of minutes does not).
const BASELINE_DRIFT_PER_MINUTE: f64 = 2.0;
/// Answers before the baseline is trusted.
const BASELINE_MIN_ANSWERS: u32 = 50;
/// The quantile "fast answers" tracks...
const FAST_QUANTILE: f64 = 0.25;
/// ...moving by this share of itself per answer.
const FAST_STEP: f64 = 0.04;

#[derive(Debug, Clone, Default)]
struct OriginState {
    /// Leg id -> start time. Ids grow with time, so the first is the oldest.
    in_flight: VecMap<u64, f64>,
    last_answer_ms: Option<f64>,
    latency_ms: Option<f64>,
    failure_share: f64,
    /// The usual time between two answers (an average, clipped like latency).
    gap_ms: Option<f64>,
    /// A running estimate of the 25th percentile of successful answers.
    fast_ms: Option<f64>,
    /// How its recent successful answers spread.
    shape: AnswerShape,
    /// The lowest recent `fast_ms`, and when it was last updated.
    baseline: Option<(f64, f64)>,
    answers: u32,
    queueing: bool,
}

/// Per-origin live load, per isolate.
#[derive(Debug, Clone)]
pub struct OriginLoad {
    params: OriginLoadParams,
    origins: Vec<OriginState>,
    next_leg: u64,
    rng: u64,
}

// === impl OriginLoad ===

impl OriginLoad {
    /// Nothing in flight at `origins` origins; `seed` draws the primaries.
    pub fn new(params: OriginLoadParams, origins: usize, seed: u64) -> Self {
        Self {
            params,
            origins: vec![OriginState::default(); origins],
            next_leg: 0,
            // Never zero: xorshift stays at zero forever.
            rng: seed | 1,
        }
    }

    /// A leg to `origin` started at `now_ms`; the id reports its end.
    pub fn leg_sent(&mut self, origin: usize, now_ms: f64) -> u64 {
        self.next_leg += 1;
        let id = self.next_leg;
        if let Some(o) = self.origins.get_mut(origin) {
            o.in_flight.insert(id, now_ms);
        }
        id
    }

    /// Leg `id` to `origin` answered at `now_ms` after `latency_ms`;
    /// `failed` when the answer was a failure (5xx, no answer).
    pub fn leg_answered(
        &mut self,
        origin: usize,
        id: u64,
        latency_ms: f64,
        failed: bool,
        now_ms: f64,
    ) {
        let Some(o) = self.origins.get_mut(origin) else {
            return;
        };
        o.in_flight.remove(&id);
        if let Some(last) = o.last_answer_ms {
            let gap = (now_ms - last).max(0.0);
            o.gap_ms = Some(clipped_average(o.gap_ms, gap));
        }
        o.last_answer_ms = Some(o.last_answer_ms.map_or(now_ms, |t| t.max(now_ms)));
        o.failure_share += EWMA_WEIGHT * (f64::from(u8::from(failed)) - o.failure_share);
        if !failed && latency_ms.is_finite() && latency_ms >= 0.0 {
            o.shape.record(latency_ms);
            let avg = clipped_average(o.latency_ms, latency_ms);
            o.latency_ms = Some(avg);
            o.answers = o.answers.saturating_add(1);
            let fast = o
                .fast_ms
                .map_or(latency_ms, |fast| fast_stepped(fast, latency_ms >= fast));
            o.fast_ms = Some(fast);
            let drifted = o.baseline.map_or(fast, |(base, at)| {
                let minutes = ((now_ms - at) / 60_000.0).max(0.0);
                base * BASELINE_DRIFT_PER_MINUTE.powf(minutes)
            });
            o.baseline = Some((fast.min(drifted), now_ms));
            if let (Some((base, _)), true) = (o.baseline, o.answers >= BASELINE_MIN_ANSWERS) {
                o.queueing = if o.queueing {
                    fast > base * HEADROOM_BELOW
                } else {
                    fast > base * QUEUEING_ABOVE
                };
            }
        }
    }

    /// Leg `id` to `origin` was cut short (lost the race, timed out, client
    /// gone): it is no longer in flight, and says nothing about latency.
    pub fn leg_cut(&mut self, origin: usize, id: u64) {
        if let Some(o) = self.origins.get_mut(origin) {
            o.in_flight.remove(&id);
        }
    }

    /// Leg `id` to `origin` was cut at `now_ms` by a hedge sent before its
    /// origin usually answers (a delay borrowed from the hedge target): its
    /// age is a lower bound on its latency, and counts as one. Otherwise
    /// such an origin is measured only by the answers that beat the hedge,
    /// its fast ones, and looks faster than it is: on slow-origin
    /// (simulator, seed 1, issue 40) the primaries drawn by latency sent it
    /// 6% of the legs instead of 3%, each a hedge (11.1% extra).
    pub fn leg_cut_early(&mut self, origin: usize, id: u64, now_ms: f64) {
        let Some(o) = self.origins.get_mut(origin) else {
            return;
        };
        let Some(start) = o.in_flight.remove(&id) else {
            return;
        };
        let age = now_ms - start;
        // The average takes what such a leg would likely have taken: its age
        // and the origin's spread above its fast answers (average less 25th
        // percentile), about what a lognormal's slower part has left to run
        // (lognormal(120 ms, 0.5) cut at 113 ms: 57 ms left, spread 50). Its
        // age alone, as a floor, still sent the origin more primaries (5% of
        // the legs, seed 1), each hedged: p99.9 244.6 ms at 9.9% extra, with
        // the spread 171.5 at 9.0% (simulator, medians of seeds 1-12).
        let spread = match (o.latency_ms, o.fast_ms) {
            (Some(avg), Some(fast)) => (avg - fast).max(0.0),
            _ => 0.0,
        };
        let likely = age + spread;
        // Only upwards: a leg cut early says nothing of how fast the origin
        // can be.
        if let Some(avg) = o.latency_ms.filter(|&avg| likely > avg) {
            o.latency_ms = Some(clipped_average(Some(avg), likely));
        }
        // The running 25th percentile steps up as for an answer slower than
        // it: a lower bound says that much.
        if let Some(fast) = o.fast_ms.filter(|&fast| age > fast) {
            o.fast_ms = Some(fast_stepped(fast, true));
        }
    }

    /// Legs in flight to `origin` now.
    pub fn in_flight(&mut self, origin: usize, now_ms: f64) -> usize {
        self.expire(origin, now_ms);
        self.origins.get(origin).map_or(0, |o| o.in_flight.len())
    }

    /// The origin's latency average (successful answers), if it has one.
    pub fn latency_ms(&self, origin: usize) -> Option<f64> {
        self.origins.get(origin).and_then(|o| o.latency_ms)
    }

    /// Its fast answers' latency (a running 25th percentile of successful
    /// answers), once it has answered enough to trust it.
    pub fn fast_ms(&self, origin: usize) -> Option<f64> {
        let o = self.origins.get(origin)?;
        o.fast_ms.filter(|_| o.answers >= BASELINE_MIN_ANSWERS)
    }

    /// Its share of failed answers (recent, averaged).
    pub fn failure_share(&self, origin: usize) -> f64 {
        self.origins.get(origin).map_or(0.0, |o| o.failure_share)
    }

    /// Whether `origin` is queueing (its latency at twice its baseline, until
    /// back under 1.5x): it takes no hedges.
    pub fn queueing(&self, origin: usize) -> bool {
        self.params.governor && self.origins.get(origin).is_some_and(|o| o.queueing)
    }

    /// The silence after which `origin` counts as stalled, if stall
    /// detection is on and the origin has a latency to measure it by.
    pub fn stall_after_ms(&self, origin: usize) -> Option<f64> {
        if self.params.stall_factor <= 0.0 {
            return None;
        }
        let o = self.origins.get(origin)?;
        let latency = o.latency_ms?;
        let gaps = o.gap_ms.unwrap_or(0.0) * STALL_MIN_GAPS;
        Some(
            (latency * self.params.stall_factor)
                .max(gaps)
                .max(self.params.stall_min_ms),
        )
    }

    /// Whether `origin` has stopped answering: several legs in flight, the
    /// oldest and the last answer both further back than its stall silence,
    /// and a silence its recent answers make unlikely.
    pub fn stalled(&mut self, origin: usize, now_ms: f64) -> bool {
        let Some(silence) = self.stall_after_ms(origin) else {
            return false;
        };
        self.expire(origin, now_ms);
        let Some(o) = self.origins.get(origin) else {
            return false;
        };
        let oldest_age = o
            .in_flight
            .values()
            .next()
            .map_or(0.0, |start| now_ms - start);
        let quiet_for = o.last_answer_ms.map_or(f64::INFINITY, |t| now_ms - t);
        if o.in_flight.len() < STALL_MIN_IN_FLIGHT || oldest_age < silence || quiet_for < silence {
            return false;
        }
        if o.shape.weight() < SHAPE_MIN_ANSWERS {
            return true;
        }
        // How likely an origin answering as it usually does stays this
        // quiet: each leg in flight not answering through its part of the
        // silence, given it had not answered before.
        let mut chance = 1.0;
        for &start in o.in_flight.values() {
            let age = now_ms - start;
            let before = (age - quiet_for).max(0.0);
            chance *= o.shape.survival(age) / o.shape.survival(before);
            if chance < STALL_CHANCE {
                return true;
            }
        }
        false
    }

    /// The primary among origins that `healthy` accepts (no side effects):
    /// by latency when configured, else the first. `None` when no origin is
    /// healthy.
    pub fn choose_primary(
        &mut self,
        now_ms: f64,
        healthy: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let n = self.origins.len();
        let candidates: Vec<usize> = (0..n).filter(|&i| healthy(i)).collect();
        let first = *candidates.first()?;
        if !self.params.by_latency || candidates.len() == 1 {
            return Some(first);
        }
        // Stalled origins get nothing while another can take the request.
        let live: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&i| !self.stalled(i, now_ms))
            .collect();
        let pool = if live.is_empty() { candidates } else { live };
        if pool.len() == 1 {
            return Some(pool[0]);
        }
        // An origin without a latency yet is weighed as the slowest known
        // one: it gets its probe share and learns. None known: operator order.
        let known: Vec<f64> = pool
            .iter()
            .filter_map(|&i| self.effective_latency(i))
            .collect();
        let Some(slowest) = known.iter().copied().reduce(f64::max) else {
            return Some(pool[0]);
        };
        let weights: Vec<f64> = pool
            .iter()
            .map(|&i| {
                let latency = self.effective_latency(i).unwrap_or(slowest).max(0.1);
                latency.powi(-4)
            })
            .collect();
        let total: f64 = weights.iter().sum();
        let probe = self.params.probe_share.clamp(0.0, 1.0 / pool.len() as f64);
        let rest = 1.0 - probe * pool.len() as f64;
        let mut draw = self.uniform();
        for (k, &i) in pool.iter().enumerate() {
            let share = probe + rest * weights[k] / total;
            if draw < share {
                return Some(i);
            }
            draw -= share;
        }
        pool.last().copied()
    }

    fn effective_latency(&self, origin: usize) -> Option<f64> {
        let o = self.origins.get(origin)?;
        Some(o.latency_ms? * (1.0 + FAILURE_PENALTY * o.failure_share))
    }

    /// Forgets legs of `origin` older than the expiry.
    fn expire(&mut self, origin: usize, now_ms: f64) {
        let expiry = self.params.leg_expiry_ms;
        if let Some(o) = self.origins.get_mut(origin) {
            while let Some((&id, &start)) = o.in_flight.first_key_value() {
                if now_ms - start < expiry {
                    break;
                }
                o.in_flight.remove(&id);
            }
        }
    }

    /// A uniform draw in [0, 1) (xorshift64*: deterministic for a seed).
    fn uniform(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The running 25th percentile `fast` after one answer at least as slow as
/// it (`slower`) or faster. Stochastic quantile tracking: a step up a
/// quarter of the time and down three quarters settles where 25% of
/// answers are faster.
fn fast_stepped(fast: f64, slower: bool) -> f64 {
    let step = FAST_STEP * fast.max(1.0);
    if slower {
        fast + FAST_QUANTILE * step
    } else {
        fast - (1.0 - FAST_QUANTILE) * step
    }
}

/// `average` moved toward `sample` by one answer's weight, the sample first
/// capped at `LATENCY_CLIP` times the average; the first sample starts it.
fn clipped_average(average: Option<f64>, sample: f64) -> f64 {
    match average {
        None => sample,
        Some(avg) => avg + EWMA_WEIGHT * (sample.min(avg.max(1.0) * LATENCY_CLIP) - avg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARAMS: OriginLoadParams = OriginLoadParams {
        by_latency: true,
        probe_share: 0.02,
        stall_factor: 3.0,
        stall_min_ms: 20.0,
        leg_expiry_ms: 30_000.0,
        governor: true,
    };

    /// Feeds `n` answers of `latency_ms` (failed or not) to `origin`.
    fn answers(load: &mut OriginLoad, origin: usize, n: usize, latency_ms: f64, failed: bool) {
        for _ in 0..n {
            let id = load.leg_sent(origin, 0.0);
            load.leg_answered(origin, id, latency_ms, failed, latency_ms);
        }
    }

    fn shares(load: &mut OriginLoad, draws: usize) -> Vec<f64> {
        let mut counts = [0usize; 2];
        for _ in 0..draws {
            counts[load.choose_primary(1_000.0, |_| true).expect("healthy")] += 1;
        }
        counts.iter().map(|&c| c as f64 / draws as f64).collect()
    }

    #[test]
    fn equal_origins_share_the_primaries() {
        let mut load = OriginLoad::new(PARAMS, 2, 7);
        answers(&mut load, 0, 50, 40.0, false);
        answers(&mut load, 1, 50, 40.0, false);
        let s = shares(&mut load, 10_000);
        assert!((s[0] - 0.5).abs() < 0.03, "{s:?}");
    }

    #[test]
    fn a_three_times_slower_origin_keeps_only_about_its_probe_share() {
        let mut load = OriginLoad::new(PARAMS, 2, 7);
        answers(&mut load, 0, 50, 120.0, false);
        answers(&mut load, 1, 50, 40.0, false);
        let s = shares(&mut load, 10_000);
        assert!(s[0] > 0.015 && s[0] < 0.05, "{s:?}");
    }

    #[test]
    fn fast_failures_make_an_origin_look_worse_not_faster() {
        let mut load = OriginLoad::new(PARAMS, 2, 7);
        for _ in 0..20 {
            answers(&mut load, 0, 19, 40.0, false);
            answers(&mut load, 0, 1, 2.0, true);
        }
        answers(&mut load, 1, 50, 40.0, false);
        assert_eq!(
            load.latency_ms(0),
            Some(40.0),
            "failures are not latency samples"
        );
        let s = shares(&mut load, 10_000);
        assert!(s[0] < 0.4, "{s:?}");
    }

    #[test]
    fn the_operator_order_is_kept_without_latency_data_or_when_asked() {
        let mut load = OriginLoad::new(PARAMS, 2, 7);
        assert_eq!(load.choose_primary(0.0, |_| true), Some(0));
        let mut ordered = OriginLoad::new(
            OriginLoadParams {
                by_latency: false,
                ..PARAMS
            },
            2,
            7,
        );
        answers(&mut ordered, 0, 50, 120.0, false);
        answers(&mut ordered, 1, 50, 40.0, false);
        assert_eq!(ordered.choose_primary(0.0, |_| true), Some(0));
        assert_eq!(ordered.choose_primary(0.0, |i| i == 1), Some(1));
        assert_eq!(ordered.choose_primary(0.0, |_| false), None);
    }

    #[test]
    fn a_silent_origin_with_aged_legs_is_stalled_and_gets_no_primaries() {
        let mut load = OriginLoad::new(PARAMS, 2, 7);
        answers(&mut load, 0, 50, 30.0, false);
        answers(&mut load, 1, 50, 30.0, false);
        // Two legs out at 100 ms, nothing answers: the silence is 90 ms.
        load.leg_sent(0, 100.0);
        load.leg_sent(0, 110.0);
        assert!(!load.stalled(0, 150.0));
        assert!(load.stalled(0, 200.0));
        for _ in 0..100 {
            assert_eq!(load.choose_primary(200.0, |_| true), Some(1));
        }
    }

    #[test]
    fn slow_legs_a_two_mode_origin_explains_are_no_stall_until_fast_ones_go_quiet_too() {
        let mut load = OriginLoad::new(PARAMS, 2, 7);
        for _ in 0..10 {
            answers(&mut load, 0, 9, 30.0, false);
            answers(&mut load, 0, 1, 250.0, false);
        }
        answers(&mut load, 1, 50, 30.0, false);
        // Two legs in the slow tenth: silent past the stall silence, but one
        // in a hundred pairs is, so not a stall.
        // (The last answer came at 250 ms.)
        load.leg_sent(0, 300.0);
        load.leg_sent(0, 310.0);
        assert!(!load.stalled(0, 500.0));
        // Two more, old enough that the fast mode should have answered
        // them, silent too: one in ten thousand. A stall.
        load.leg_sent(0, 440.0);
        load.leg_sent(0, 445.0);
        assert!(load.stalled(0, 500.0));
    }

    #[test]
    fn one_straggler_alone_is_not_a_stall() {
        let mut load = OriginLoad::new(PARAMS, 2, 7);
        answers(&mut load, 0, 50, 30.0, false);
        let slow = load.leg_sent(0, 100.0);
        assert!(!load.stalled(0, 500.0), "one leg in flight");
        // Others keep answering while two legs straggle: not a stall either.
        load.leg_sent(0, 110.0);
        let quick = load.leg_sent(0, 400.0);
        load.leg_answered(0, quick, 30.0, false, 430.0);
        assert!(!load.stalled(0, 500.0));
        load.leg_answered(0, slow, 400.0, false, 500.0);
    }

    #[test]
    fn an_origin_whose_latency_doubles_is_queueing_until_back_under_one_and_a_half() {
        let mut load = OriginLoad::new(PARAMS, 1, 7);
        answers(&mut load, 0, 60, 40.0, false);
        assert!(!load.queueing(0));
        // Every answer slows down (a queue): the fast ones too.
        answers(&mut load, 0, 150, 120.0, false);
        assert!(load.queueing(0));
        // Back to 70 ms: under 2x, but not yet under 1.5x of 40.
        answers(&mut load, 0, 150, 70.0, false);
        assert!(load.queueing(0));
        answers(&mut load, 0, 300, 40.0, false);
        assert!(!load.queueing(0));
    }

    #[test]
    fn stragglers_and_a_slow_minority_are_not_a_queue() {
        let mut load = OriginLoad::new(PARAMS, 1, 7);
        answers(&mut load, 0, 60, 40.0, false);
        // One answer in five takes 20x longer: the fast ones are unchanged.
        for _ in 0..100 {
            answers(&mut load, 0, 4, 40.0, false);
            answers(&mut load, 0, 1, 800.0, false);
        }
        assert!(!load.queueing(0));
    }

    #[test]
    fn legs_never_reported_expire() {
        let mut load = OriginLoad::new(PARAMS, 1, 7);
        load.leg_sent(0, 0.0);
        load.leg_sent(0, 10.0);
        assert_eq!(load.in_flight(0, 29_999.0), 2);
        assert_eq!(load.in_flight(0, 30_005.0), 1);
        assert_eq!(load.in_flight(0, 40_000.0), 0);
    }
}
