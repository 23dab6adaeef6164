//! The Hedger's race decisions, event by event on a clock the test sets.

use super::*;
use crate::admission::hedge_gate::HedgeGate;
use crate::no_hedge::HedgeDenied;
use crate::race::{HedgeCause, Route};
use crate::request::eligibility::Eligibility;
use crate::request::eligibility::NotHedgeableReason;
use crate::vec_map::VecMap;

/// Two origins in two zones, a static 100 ms hedge delay, and a budget
/// that a few requests fund (a new Hedger has earned no hedges).
fn hedger(extra: &[(&str, &str)]) -> Hedger {
    let mut vars: VecMap<String, String> = VecMap::new();
    vars.insert(
        "HEDGE_ORIGINS".into(),
        r#"[{"name":"a","url":"http://a","zone":"z1"},{"name":"b","url":"http://b","zone":"z2"}]"#
            .into(),
    );
    vars.insert("HEDGE_MODE".into(), "static".into());
    vars.insert("HEDGE_STATIC_DELAY_MS".into(), "100".into());
    vars.insert("HEDGE_BUDGET_PERCENT".into(), "100".into());
    for (k, v) in extra {
        vars.insert(k.to_string(), v.to_string());
    }
    let params = crate::config::parse(&vars).expect("valid test config");
    let mut h = Hedger::new(params, false, 0.0, 1);
    // Earn a few tokens, as earlier requests would have.
    for _ in 0..5 {
        h.gate.deposit(0.0);
    }
    h
}

const GET: Eligibility = Eligibility::Hedgeable {
    buffer_body: false,
    peer_only: false,
};

fn start(h: &mut Hedger, now_ms: f64) -> RaceState {
    let plan = h.plan(GET, "/r", now_ms);
    h.start(plan, now_ms)
}

#[test]
fn primary_answers_before_the_delay() {
    let mut h = hedger(&[]);
    let mut race = start(&mut h, 0.0);
    assert_eq!(race.plan.delay.map(|d| d.delay_ms), Some(100.0));
    assert_eq!(
        h.leg_finished(&mut race, Leg::Primary, Ok(200), 40.0),
        Action::Finish(RaceEnd::Won(Leg::Primary))
    );
    assert_eq!(h.timer_fired(&mut race, 100.0), Action::Wait);
    assert!(!race.hedge_sent());
    assert_eq!(race.leg(Leg::Primary).elapsed_ms(40.0), Some(40.0));
}

#[test]
fn hedge_wins_and_the_primary_is_cut_short() {
    let mut h = hedger(&[]);
    let mut race = start(&mut h, 0.0);
    assert_eq!(
        h.timer_fired(&mut race, 100.0),
        Action::SendHedge {
            origin: 1,
            abort_primary: false
        }
    );
    h.hedge_sent(&mut race, 100.0);
    assert_eq!(
        h.leg_finished(&mut race, Leg::Hedge, Ok(200), 130.0),
        Action::Finish(RaceEnd::Won(Leg::Hedge))
    );
    assert!(race.leg(Leg::Primary).aborted);
    let summary = race.summary(false, 130.0);
    assert!(summary.hedge_sent && summary.hedge_won);
    assert_eq!(summary.wasted_ms, 130.0);
    assert_eq!(summary.origin_ms, 160.0);
}

#[test]
fn primary_answers_after_the_hedge_went_out() {
    let mut h = hedger(&[]);
    let mut race = start(&mut h, 0.0);
    h.timer_fired(&mut race, 100.0);
    h.hedge_sent(&mut race, 100.0);
    assert_eq!(
        h.leg_finished(&mut race, Leg::Primary, Ok(200), 120.0),
        Action::Finish(RaceEnd::Won(Leg::Primary))
    );
    assert!(race.leg(Leg::Hedge).aborted, "the hedge lost");
}

#[test]
fn fast_failure_hedges_at_once() {
    let mut h = hedger(&[]);
    let mut race = start(&mut h, 0.0);
    assert_eq!(
        h.leg_finished(&mut race, Leg::Primary, Ok(503), 3.0),
        Action::SendHedge {
            origin: 1,
            abort_primary: false
        }
    );
    h.hedge_sent(&mut race, 3.0);
    assert_eq!(
        h.leg_finished(&mut race, Leg::Hedge, Ok(200), 40.0),
        Action::Finish(RaceEnd::Won(Leg::Hedge))
    );
}

/// Teaches `h` that origin 0 answers in about 20 ms.
fn learn_latency(h: &mut Hedger, at_ms: f64) {
    for i in 0..20 {
        let t = at_ms + f64::from(i);
        let mut race = start(h, t);
        h.leg_finished(&mut race, Leg::Primary, Ok(200), t + 20.0);
    }
}

#[test]
fn a_stalled_origin_is_hedged_at_the_stall_check_before_the_delay() {
    let mut h = hedger(&[
        ("HEDGE_PRIMARY", "ordered"),
        ("HEDGE_STATIC_DELAY_MS", "1000"),
        ("HEDGE_TUNING", r#"{"stall_factor":3}"#),
    ]);
    learn_latency(&mut h, 0.0);
    // Two requests go out at 100 ms and nothing answers: a 60 ms silence
    // (3 x 20 ms) with both in flight is a stall.
    let mut first = start(&mut h, 100.0);
    let mut second = start(&mut h, 100.0);
    assert_eq!(first.plan.first_timer_ms(), Some(60.0));
    assert_eq!(
        h.timer_fired(&mut first, 160.0),
        Action::SendHedge {
            origin: 1,
            abort_primary: false
        }
    );
    assert_eq!(first.hedge_cause, Some(HedgeCause::Stall));
    // New primaries avoid nothing in ordered mode, but the stall check
    // catches them too.
    assert!(matches!(
        h.timer_fired(&mut second, 160.0),
        Action::SendHedge { .. }
    ));
}

#[test]
fn a_stall_check_that_finds_none_looks_again_then_waits_out_the_delay() {
    let mut h = hedger(&[
        ("HEDGE_PRIMARY", "ordered"),
        ("HEDGE_STATIC_DELAY_MS", "100"),
        ("HEDGE_TUNING", r#"{"stall_factor":3}"#),
    ]);
    learn_latency(&mut h, 0.0);
    let mut slow = start(&mut h, 100.0);
    // Another request answers meanwhile: the origin is alive.
    let mut quick = start(&mut h, 120.0);
    h.leg_finished(&mut quick, Leg::Primary, Ok(200), 140.0);
    assert_eq!(h.timer_fired(&mut slow, 160.0), Action::Wait);
    // Half the silence later (30 ms) it looks again; then the delay.
    assert_eq!(slow.take_rearm(), Some(30.0));
    let mut another = start(&mut h, 170.0);
    h.leg_finished(&mut another, Leg::Primary, Ok(200), 185.0);
    assert_eq!(h.timer_fired(&mut slow, 190.0), Action::Wait);
    assert_eq!(slow.take_rearm(), Some(10.0));
    assert!(matches!(
        h.timer_fired(&mut slow, 200.0),
        Action::SendHedge { .. }
    ));
    assert_eq!(slow.hedge_cause, Some(HedgeCause::Delay));
}

#[test]
fn a_fast_failure_is_retried_even_when_its_origin_budget_is_cut() {
    let vars = [("HEDGE_PRIMARY", "ordered"), ("HEDGE_BUDGET_PERCENT", "12")];
    for (policy, retried) in [("tail-aware", true), ("fixed-quantile", false)] {
        let mut h = hedger(&[vars[0], vars[1], ("HEDGE_POLICY", policy)]);
        // Origin 0 answers 503 to a quarter of 40 requests: its budget
        // is cut to the reduced share, whose bucket is then empty.
        for i in 0..40 {
            let t = f64::from(i);
            let mut race = start(&mut h, t);
            let status = if i % 4 == 0 { 503 } else { 200 };
            if let Action::SendHedge { .. } = h.leg_finished(&mut race, Leg::Primary, Ok(status), t)
            {
                h.hedge_sent(&mut race, t);
                h.leg_finished(&mut race, Leg::Hedge, Ok(200), t + 1.0);
            }
        }
        let mut race = start(&mut h, 100.0);
        let action = h.leg_finished(&mut race, Leg::Primary, Ok(503), 101.0);
        assert_eq!(
            matches!(action, Action::SendHedge { .. }),
            retried,
            "{policy}: {action:?}"
        );
    }
}

#[test]
fn a_shed_hedge_waits_for_the_primary_without_a_third_attempt() {
    let mut h = hedger(&[("HEDGE_TUNING", r#"{"third_attempt":false}"#)]);
    let mut race = start(&mut h, 0.0);
    h.timer_fired(&mut race, 100.0);
    h.hedge_sent(&mut race, 100.0);
    assert_eq!(
        h.leg_finished(&mut race, Leg::Hedge, Ok(503), 102.0),
        Action::Wait
    );
    assert_eq!(
        h.leg_finished(&mut race, Leg::Primary, Ok(200), 300.0),
        Action::Finish(RaceEnd::Won(Leg::Primary))
    );
}

#[test]
fn a_shed_hedge_is_replaced_once_while_the_primary_runs() {
    let mut h = hedger(&[]);
    let mut race = start(&mut h, 0.0);
    h.timer_fired(&mut race, 100.0);
    h.hedge_sent(&mut race, 100.0);
    let shed_at = race.leg(Leg::Hedge).origin;
    let Action::SendHedge {
        origin,
        abort_primary: false,
    } = h.leg_finished(&mut race, Leg::Hedge, Ok(503), 102.0)
    else {
        panic!("no replacement for the shed hedge");
    };
    assert_ne!(origin, shed_at, "away from the origin that shed it");
    h.hedge_sent(&mut race, 102.0);
    assert!(race.third_attempt_sent());
    // The replacement is shed too: nothing more, the primary runs on.
    assert_eq!(
        h.leg_finished(&mut race, Leg::Hedge, Ok(503), 104.0),
        Action::Wait
    );
    assert_eq!(
        h.leg_finished(&mut race, Leg::Primary, Ok(200), 300.0),
        Action::Finish(RaceEnd::Won(Leg::Primary))
    );
}

#[test]
fn a_hedge_refused_as_a_duplicate_is_not_sent_again() {
    let mut h = hedger(&[]);
    for status in [409, 425, 429] {
        let mut race = start(&mut h, 0.0);
        h.timer_fired(&mut race, 100.0);
        h.hedge_sent(&mut race, 100.0);
        assert_eq!(
            h.leg_finished(&mut race, Leg::Hedge, Ok(status), 102.0),
            Action::Wait,
            "{status}"
        );
    }
}

#[test]
fn both_fail() {
    let mut h = hedger(&[("HEDGE_TUNING", r#"{"third_attempt":false}"#)]);
    let mut race = start(&mut h, 0.0);
    h.leg_finished(&mut race, Leg::Primary, Err("reset".into()), 2.0);
    h.hedge_sent(&mut race, 2.0);
    assert_eq!(
        h.leg_finished(&mut race, Leg::Hedge, Ok(502), 5.0),
        Action::Finish(RaceEnd::BothFailed {
            answered: Some(Leg::Hedge)
        }),
        "the hedge's origin answered: its 502 goes to the client"
    );
    assert_eq!(race.leg(Leg::Primary).error.as_deref(), Some("reset"));
}

#[test]
fn both_answer_with_errors_and_the_primary_answer_is_delivered() {
    let mut h = hedger(&[("HEDGE_TUNING", r#"{"third_attempt":false}"#)]);
    let mut race = start(&mut h, 0.0);
    h.leg_finished(&mut race, Leg::Primary, Ok(503), 2.0);
    h.hedge_sent(&mut race, 2.0);
    assert_eq!(
        h.leg_finished(&mut race, Leg::Hedge, Ok(503), 5.0),
        Action::Finish(RaceEnd::BothFailed {
            answered: Some(Leg::Primary)
        })
    );
}

#[test]
fn no_origin_answered_at_all() {
    let mut h = hedger(&[("HEDGE_TUNING", r#"{"third_attempt":false}"#)]);
    let mut race = start(&mut h, 0.0);
    h.leg_finished(&mut race, Leg::Primary, Err("reset".into()), 2.0);
    h.hedge_sent(&mut race, 2.0);
    assert_eq!(
        h.leg_finished(&mut race, Leg::Hedge, Err("refused".into()), 5.0),
        Action::Finish(RaceEnd::BothFailed { answered: None })
    );
}

#[test]
fn timeout_cuts_every_leg_and_blames_their_origins() {
    let mut h = hedger(&[("HEDGE_TUNING", r#"{"health_consecutive_failures":1}"#)]);
    let mut race = start(&mut h, 0.0);
    h.timer_fired(&mut race, 100.0);
    h.hedge_sent(&mut race, 100.0);
    assert_eq!(
        h.deadline_passed(&mut race, 30_000.0),
        Action::Finish(RaceEnd::TimedOut)
    );
    assert!(race.legs.iter().all(|l| l.aborted));
    let degraded = |h: &mut Hedger, o| {
        !h.gate
            .origin_snapshot(o, 30_000.0)
            .is_some_and(|s| s.healthy)
    };
    assert!(degraded(&mut h, 0) && degraded(&mut h, 1));
}

#[test]
fn client_gone_cuts_every_leg_and_blames_no_origin() {
    let mut h = hedger(&[("HEDGE_TUNING", r#"{"health_consecutive_failures":1}"#)]);
    let mut race = start(&mut h, 0.0);
    assert_eq!(
        h.client_gone(&mut race, 50.0),
        Action::Finish(RaceEnd::ClientGone)
    );
    assert!(race.leg(Leg::Primary).aborted);
    assert_eq!(
        h.timer_fired(&mut race, 100.0),
        Action::Wait,
        "no hedge for a gone client"
    );
    let healthy = h.gate.origin_snapshot(0, 50.0).is_some_and(|s| s.healthy);
    assert!(healthy);
}

#[test]
fn a_hedge_the_worker_could_not_send_blames_no_origin() {
    let mut h = hedger(&[]);
    let mut race = start(&mut h, 0.0);
    h.timer_fired(&mut race, 100.0);
    assert_eq!(h.hedge_not_sent(&mut race, 100.0), Action::Wait);
    assert_eq!(
        h.leg_finished(&mut race, Leg::Primary, Ok(200), 400.0),
        Action::Finish(RaceEnd::Won(Leg::Primary))
    );
    assert!(!race.hedge_sent());
}

#[test]
fn no_budget_means_no_hedge_and_says_why() {
    let mut h = hedger(&[("HEDGE_BUDGET_PERCENT", "0")]);
    h.gate = HedgeGate::new(&h.params().gate(), 0.0);
    let mut race = start(&mut h, 0.0);
    assert_eq!(h.timer_fired(&mut race, 100.0), Action::Wait);
    assert_eq!(race.no_hedge, Some(NoHedge::Denied(HedgeDenied::Budget)));
    assert_eq!(race.no_hedge.map(|r| r.as_str()), Some("budget"));
}

#[test]
fn an_ineligible_request_is_planned_without_a_hedge() {
    let mut h = hedger(&[]);
    let plan = h.plan(
        Eligibility::NotHedgeable(NotHedgeableReason::NotIdempotent),
        "/orders",
        0.0,
    );
    assert_eq!(plan.delay, None);
    assert_eq!(
        plan.no_hedge,
        Some(NoHedge::NotEligible(NotHedgeableReason::NotIdempotent))
    );
    let mut race = h.start(plan, 0.0);
    assert_eq!(
        h.leg_finished(&mut race, Leg::Primary, Ok(503), 5.0),
        Action::Finish(RaceEnd::PrimaryFailed),
        "a failing POST is not retried elsewhere"
    );
}

#[test]
fn retry_mode_abandons_the_primary_when_the_timer_fires() {
    let mut h = hedger(&[
        ("HEDGE_MODE", "retry"),
        ("HEDGE_TUNING", r#"{"retry_timeout_ms":1000}"#),
    ]);
    let mut race = start(&mut h, 0.0);
    assert_eq!(
        h.timer_fired(&mut race, 1_000.0),
        Action::SendHedge {
            origin: 1,
            abort_primary: true
        }
    );
    assert!(race.leg(Leg::Primary).aborted);
}

#[test]
fn a_double_fast_failure_gets_a_third_attempt_on_the_healthier_origin() {
    let mut h = hedger(&[]);
    let mut race = start(&mut h, 0.0);
    let primary = race.plan.primary;
    h.leg_finished(&mut race, Leg::Primary, Ok(503), 2.0);
    h.hedge_sent(&mut race, 2.0);
    let action = h.leg_finished(&mut race, Leg::Hedge, Err("reset".into()), 5.0);
    let Action::SendHedge { origin, .. } = action else {
        panic!("expected a third attempt, got {action:?}");
    };
    h.hedge_sent(&mut race, 5.0);
    assert!(race.third_attempt_sent());
    assert_eq!(
        race.failed_hedge.as_ref().map(|l| l.error.is_some()),
        Some(true)
    );
    assert_eq!(
        h.leg_finished(&mut race, Leg::Hedge, Ok(200), 30.0),
        Action::Finish(RaceEnd::Won(Leg::Hedge))
    );
    assert_eq!(race.leg(Leg::Hedge).origin, origin);
    let _ = primary;
    // A fourth is never sent: the next double failure after a failed third ends it.
    let mut again = start(&mut h, 100.0);
    h.leg_finished(&mut again, Leg::Primary, Ok(503), 102.0);
    h.hedge_sent(&mut again, 102.0);
    h.leg_finished(&mut again, Leg::Hedge, Ok(503), 104.0);
    if again.third_attempt_sent() || again.race.third_sent() {
        h.hedge_sent(&mut again, 104.0);
        assert!(matches!(
            h.leg_finished(&mut again, Leg::Hedge, Ok(503), 106.0),
            Action::Finish(RaceEnd::BothFailed { .. })
        ));
    }
}

#[test]
fn a_slow_double_failure_and_a_request_that_may_not_be_hedged_get_no_third() {
    let mut h = hedger(&[("HEDGE_TIMEOUT_MS", "1000")]);
    let mut race = start(&mut h, 0.0);
    h.timer_fired(&mut race, 100.0);
    h.hedge_sent(&mut race, 100.0);
    h.leg_finished(&mut race, Leg::Primary, Ok(503), 200.0);
    assert!(
        matches!(
            h.leg_finished(&mut race, Leg::Hedge, Ok(503), 400.0),
            Action::Finish(RaceEnd::BothFailed { .. })
        ),
        "the hedge failed after a quarter of the timeout"
    );
    let plan = h.plan(
        Eligibility::NotHedgeable(NotHedgeableReason::NotIdempotent),
        "/r",
        500.0,
    );
    let mut post = h.start(plan, 500.0);
    assert_eq!(
        h.leg_finished(&mut post, Leg::Primary, Ok(503), 502.0),
        Action::Finish(RaceEnd::PrimaryFailed)
    );
}

/// The adaptive mode with a 100 ms cold delay, a 5 ms busy level and no
/// stall checks (each race's one timer is its hedge delay).
fn busy_rule_hedger() -> Hedger {
    hedger(&[
        ("HEDGE_MODE", "adaptive"),
        (
            "HEDGE_TUNING",
            r#"{"cold_delay_ms":100,"isolate_busy_lag_ms":5,"stall_factor":0}"#,
        ),
    ])
}

#[test]
fn a_busy_isolate_keeps_hedging_while_its_hedges_win() {
    let mut h = busy_rule_hedger();
    // Every hedge wins (the delays are the origin's): first with timers on
    // time, then 30 ms late.
    let mut t = 0.0;
    for i in 0..160 {
        let mut race = start(&mut h, t);
        let lag = if i < 100 { 0.0 } else { 30.0 };
        let late = t + race.plan.first_timer_ms().unwrap_or(0.0) + lag;
        let action = h.timer_fired(&mut race, late);
        assert!(
            matches!(action, Action::SendHedge { .. }),
            "hedge {i} not sent: {:?}",
            race.no_hedge
        );
        h.hedge_sent(&mut race, late);
        h.leg_finished(&mut race, Leg::Hedge, Ok(200), late + 30.0);
        t += 10.0;
    }
    assert!(h.isolate_lag.busy(t));
}

#[test]
fn a_busy_isolate_sends_no_hedge_for_a_slow_primary_but_retries_a_failure() {
    let mut h = busy_rule_hedger();
    // Timers firing 30 ms late, over and over; the hedges that go out lose
    // (enough of them for each origin's primaries to tell).
    let mut t = 0.0;
    for _ in 0..100 {
        let mut race = start(&mut h, t);
        let late = t + race.plan.first_timer_ms().unwrap_or(0.0) + 30.0;
        if let Action::SendHedge { .. } = h.timer_fired(&mut race, late) {
            h.hedge_sent(&mut race, late);
        }
        h.leg_finished(&mut race, Leg::Primary, Ok(200), late + 10.0);
        t += 10.0;
    }
    let mut slow = start(&mut h, t);
    let late = t + slow.plan.first_timer_ms().unwrap_or(0.0) + 30.0;
    assert_eq!(h.timer_fired(&mut slow, late), Action::Wait);
    assert_eq!(
        slow.no_hedge,
        Some(NoHedge::Denied(HedgeDenied::IsolateBusy))
    );
    let mut failed = start(&mut h, t);
    assert!(matches!(
        h.leg_finished(&mut failed, Leg::Primary, Ok(503), t + 2.0),
        Action::SendHedge { .. }
    ));
    assert!(h.isolate_lag.mean_ms(late) > 5.0);
}

/// Three origins and route policies: `/off` never hedges, `/own` has its
/// own 0% budget, `/bc` uses origins b and c only, with a 40 ms static
/// delay and a 2 s timeout.
fn routed() -> Hedger {
    hedger(&[
        (
            "HEDGE_ORIGINS",
            r#"[{"name":"a","url":"http://a","zone":"z1"},{"name":"b","url":"http://b","zone":"z2"},{"name":"c","url":"http://c","zone":"z3"}]"#,
        ),
        ("HEDGE_PRIMARY", "ordered"),
        (
            "HEDGE_ROUTES",
            r#"[{"prefix":"/off","mode":"off"},{"prefix":"/own","budget_percent":0},{"prefix":"/bc","name":"bc","origins":["b","c"],"mode":"static","static_delay_ms":40,"timeout_ms":2000}]"#,
        ),
    ])
}

#[test]
fn a_route_with_hedging_off_plans_no_hedge_and_spends_nothing() {
    let mut h = routed();
    let tokens = h.gate.budget_tokens(0.0);
    let plan = h.plan_for(
        GET,
        &Route {
            key: "/off".into(),
            policy: Some(0),
        },
        0.0,
    );
    assert_eq!(plan.delay, None);
    assert_eq!(plan.no_hedge, Some(NoHedge::Off));
    assert_eq!(
        h.gate.budget_tokens(0.0),
        tokens,
        "nothing deposited or spent"
    );
    // The same request without the policy hedges at the global 100 ms.
    assert_eq!(
        h.plan(GET, "/off", 0.0).delay.map(|d| d.delay_ms),
        Some(100.0)
    );
}

#[test]
fn a_route_with_its_own_budget_spends_from_its_own_bucket() {
    let mut h = routed();
    let global = h.gate.budget_tokens(0.0);
    let plan = h.plan_for(
        GET,
        &Route {
            key: "/own".into(),
            policy: Some(1),
        },
        0.0,
    );
    let mut race = h.start(plan, 0.0);
    // Its own bucket earns 0%: the timer finds no token, though the global bucket has some.
    assert_eq!(h.timer_fired(&mut race, 100.0), Action::Wait);
    assert!(!race.hedge_sent());
    assert!(matches!(
        race.no_hedge,
        Some(NoHedge::Denied(HedgeDenied::Budget))
    ));
    assert!(
        h.gate.budget_tokens(100.0) >= global,
        "the global bucket was not touched"
    );
}

#[test]
fn a_route_uses_only_its_origins_its_delay_and_its_timeout() {
    let mut h = routed();
    let plan = h.plan_for(
        GET,
        &Route {
            key: "bc".into(),
            policy: Some(2),
        },
        0.0,
    );
    assert_eq!(plan.primary, 1, "b: a is not among the route's origins");
    assert_eq!(plan.delay.map(|d| d.delay_ms), Some(40.0));
    assert_eq!(plan.timeout_ms, 2_000.0);
    let mut race = h.start(plan, 0.0);
    match h.timer_fired(&mut race, 40.0) {
        Action::SendHedge { origin, .. } => assert_eq!(origin, 2, "the hedge goes to c, never a"),
        other => panic!("{other:?}"),
    }
    // Without the policy the first origin is the primary.
    assert_eq!(h.plan(GET, "/x", 0.0).primary, 0);
}

/// Two origins, a static 100 ms delay, the PoP aggregator bound, and no
/// tokens earned yet: `extra` vars on top.
fn pop_hedger(extra: &[(&str, &str)]) -> Hedger {
    let mut vars: VecMap<String, String> = VecMap::new();
    vars.insert(
        "HEDGE_ORIGINS".into(),
        r#"[{"name":"a","url":"http://a"},{"name":"b","url":"http://b"}]"#.into(),
    );
    vars.insert("HEDGE_MODE".into(), "static".into());
    vars.insert("HEDGE_STATIC_DELAY_MS".into(), "100".into());
    for (k, v) in extra {
        vars.insert(k.to_string(), v.to_string());
    }
    Hedger::new(crate::config::parse(&vars).expect("valid"), true, 0.0, 1)
}

/// An aggregator's reply: the global hedge fraction, and route shares.
fn pop_reply(
    hedge_fraction: f64,
    route_budgets: Vec<crate::pop::push::RouteShare>,
) -> crate::pop::push::PushReply {
    crate::pop::push::PushReply {
        version: crate::pop::push::PUSH_VERSION,
        keys: vec![],
        hedge_fraction,
        eligible: 100,
        origins: vec![],
        route_budgets,
        probes: Vec::new(),
    }
}

#[test]
fn a_route_with_its_own_budget_has_its_own_pop_share() {
    use crate::pop::push::RouteShare;
    let mut h = pop_hedger(&[(
        "HEDGE_ROUTES",
        r#"[{"prefix":"/own","name":"own","budget_percent":30}]"#,
    )]);
    let names = vec!["a".to_string(), "b".to_string()];
    // The PoP says: the global share is over 12%, the route's 20% under its 30%.
    let reply = |route_hedges: u64| {
        let share = RouteShare {
            route: "own".into(),
            eligible: 100,
            hedges: route_hedges,
        };
        pop_reply(0.5, vec![share])
    };
    h.pop.push_succeeded(&reply(20), 10, 0.0, &names);
    // Earn tokens in both buckets, so only the PoP shares decide.
    for _ in 0..5 {
        h.gate.scope(Some(0));
        h.gate.deposit(0.0);
        h.gate.scope(None);
        h.gate.deposit(0.0);
    }
    let denied = Some(NoHedge::Denied(HedgeDenied::PopBudget));
    let mut global = start(&mut h, 1.0);
    assert_eq!(h.timer_fired(&mut global, 101.0), Action::Wait);
    assert_eq!(global.no_hedge, denied, "the global share is over 12%");
    let own = h.plan_for(
        GET,
        &Route {
            key: "own".into(),
            policy: Some(0),
        },
        1.0,
    );
    let mut own = h.start(own, 1.0);
    assert!(
        matches!(h.timer_fired(&mut own, 101.0), Action::SendHedge { .. }),
        "the route's own share is under its own budget"
    );
    h.hedge_sent(&mut own, 101.0);
    // Its share over 30%: that route stops, on its own.
    h.pop.push_succeeded(&reply(40), 10, 2.0, &names);
    let again = h.plan_for(
        GET,
        &Route {
            key: "own".into(),
            policy: Some(0),
        },
        3.0,
    );
    let mut again = h.start(again, 3.0);
    assert_eq!(h.timer_fired(&mut again, 103.0), Action::Wait);
    assert_eq!(again.no_hedge, denied);
    // Its requests and hedges are pushed apart from the global counts.
    let push = h.pop.take_push(4.0, 0.95, &names);
    assert_eq!(push.eligible, 1, "only the global request");
    assert_eq!(push.route_budgets.len(), 1);
    assert_eq!(
        (push.route_budgets[0].eligible, push.route_budgets[0].hedges),
        (2, 1)
    );
}

#[test]
fn a_pop_over_its_budget_still_retries_a_fast_failure() {
    let mut h = pop_hedger(&[("HEDGE_PRIMARY", "ordered")]);
    for _ in 0..20 {
        h.gate.deposit(0.0);
    }
    let names = vec!["a".to_string(), "b".to_string()];
    h.pop
        .push_succeeded(&pop_reply(0.5, Vec::new()), 10, 0.0, &names);
    let mut race = start(&mut h, 1.0);
    // The primary resets at once: its retry on b replaces it.
    match h.leg_finished(&mut race, Leg::Primary, Err("reset".into()), 3.0) {
        Action::SendHedge { origin, .. } => assert_eq!(origin, 1),
        other => panic!("a fast failure was not retried: {other:?}"),
    }
    assert_eq!(race.hedge_cause, Some(HedgeCause::Failure));
}

#[test]
fn a_route_policy_picks_its_own_delay_rule() {
    use crate::estimation::delay_policy::DelayBasis;
    use crate::estimation::sketch::Sample;
    let mut h = hedger(&[
        ("HEDGE_MODE", "adaptive"),
        (
            "HEDGE_ROUTES",
            r#"[{"prefix":"/q","name":"q","policy":"fixed-quantile"},{"prefix":"/t","name":"t"}]"#,
        ),
    ]);
    // Plenty of samples on both routes: the benefit rule has its data.
    for route in ["q", "t"] {
        for origin in [0, 1] {
            for i in 0..2_000 {
                let ms = if i % 50 == 0 {
                    800.0
                } else {
                    30.0 + f64::from(i % 20)
                };
                h.estimator
                    .record(origin, route, Sample::Completed(ms), 1_000.0);
            }
        }
    }
    let basis =
        |h: &mut Hedger, route: &str| h.route_delay(0, route, 2_000.0).choice.map(|c| c.basis);
    assert_eq!(
        basis(&mut h, "t"),
        Some(DelayBasis::Benefit),
        "the global tail-aware rule"
    );
    assert_eq!(
        basis(&mut h, "q"),
        Some(DelayBasis::Route),
        "its own rule: the quantile"
    );
}

/// A hedger whose origin 0 ("a", the primary: HEDGE_PRIMARY=ordered) has
/// answered 60 times in `a_ms`, and origin 1 ("b") 60 times in 30 ms, with
/// plenty of samples on route "/r" for b alone: b's delay is by benefit,
/// a has too few samples for one.
fn slow_primary_hedger(a_ms: f64) -> Hedger {
    use crate::estimation::sketch::Sample;
    let mut h = hedger(&[
        ("HEDGE_MODE", "adaptive"),
        ("HEDGE_PRIMARY", "ordered"),
        // No stall checks: the timer fires at the delay.
        ("HEDGE_TUNING", r#"{"stall_factor":0}"#),
    ]);
    // a's answers spread over a_ms / 2 to 3 a_ms / 2; b's at 30 ms.
    for i in 0..60 {
        let spread = [0.5, 0.75, 1.25, 1.5][i % 4];
        for (origin, ms) in [(0, a_ms * spread), (1, 30.0)] {
            let id = h.gate.load.leg_sent(origin, 0.0);
            h.gate.load.leg_answered(origin, id, ms, false, ms);
        }
    }
    for i in 0..2_000 {
        let ms = if i % 50 == 0 {
            800.0
        } else {
            25.0 + f64::from(i % 20)
        };
        h.estimator.record(1, "/r", Sample::Completed(ms), 500.0);
    }
    for i in 0..100 {
        let ms = a_ms + f64::from(i % 40);
        h.estimator.record(0, "/r", Sample::Completed(ms), 500.0);
    }
    h
}

#[test]
fn a_slow_primary_without_a_delay_of_its_own_waits_no_longer_than_its_target() {
    use crate::estimation::delay_policy::DelayBasis;
    let mut h = slow_primary_hedger(120.0);
    let target = h.route_delay(1, "/r", 1_000.0).choice.expect("b's delay");
    assert_eq!(target.basis, DelayBasis::Benefit);
    let own = h.route_delay(0, "/r", 1_000.0).choice.expect("a's delay");
    assert_eq!(own.basis, DelayBasis::Target);
    assert_eq!(own.delay_ms, target.delay_ms);
    // Its request's hedge goes out at b's delay; when the hedge wins, the
    // primary it cut counts as at least that slow: a's latency average
    // rises instead of keeping only the answers that beat the hedges.
    let mut race = start(&mut h, 1_000.0);
    assert_eq!(race.plan.primary, 0);
    assert_eq!(race.plan.delay, Some(own));
    let hedge_at = 1_000.0 + own.delay_ms;
    assert!(matches!(
        h.timer_fired(&mut race, hedge_at),
        Action::SendHedge { origin: 1, .. }
    ));
    h.hedge_sent(&mut race, hedge_at);
    let before = h.gate.load.latency_ms(0).expect("a's average");
    h.leg_finished(&mut race, Leg::Hedge, Ok(200), hedge_at + 30.0);
    assert!(race.leg(Leg::Primary).aborted);
    let after = h.gate.load.latency_ms(0).expect("a's average");
    assert!(after > before, "{before} -> {after}");
}

#[test]
fn a_primary_as_fast_as_its_target_keeps_its_own_quantile() {
    use crate::estimation::delay_policy::DelayBasis;
    // Few primaries for a while (after a pause), but not slower by nature.
    let mut h = slow_primary_hedger(35.0);
    h.route_delay(1, "/r", 1_000.0);
    let own = h.route_delay(0, "/r", 1_000.0).choice.expect("a's delay");
    assert_ne!(own.basis, DelayBasis::Target);
    // And a leg it loses says nothing of its latency.
    let mut race = start(&mut h, 1_000.0);
    let hedge_at = 1_000.0 + own.delay_ms;
    assert!(matches!(
        h.timer_fired(&mut race, hedge_at),
        Action::SendHedge { origin: 1, .. }
    ));
    h.hedge_sent(&mut race, hedge_at);
    let before = h.gate.load.latency_ms(0);
    h.leg_finished(&mut race, Leg::Hedge, Ok(200), hedge_at + 30.0);
    assert_eq!(h.gate.load.latency_ms(0), before);
}
