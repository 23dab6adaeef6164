//! Runs one hedged race: primary fetch, hedge timer, hedge fetch, first answer wins.
//!
//! The decisions come from [`crate::race::Race`]; this module only does the
//! I/O: it starts legs, waits on whichever event comes first, aborts the loser
//! through its `AbortController` as soon as the winner's headers arrive, and
//! records latency samples.

use std::time::Duration;

use futures::future::{Fuse, FutureExt, LocalBoxFuture};
use worker::{web_sys, Delay};

use super::isolate;
use super::leg::{self, OutboundRequest};
use crate::config::Params;
use crate::delay_policy::DelayChoice;
use crate::health::Outcome;
use crate::hedge_gate::HedgeDenied;
use crate::outbound::upstream_url;
use crate::race::{classify_status, hedge_refused, Leg, LegOutcome, Race, Step};
use crate::sketch::Sample;

/// What a race needs to know beyond the request itself.
#[derive(Debug)]
pub(crate) struct RacePlan {
    /// Index of the primary origin.
    pub(crate) primary: usize,
    /// Route key latency is recorded under.
    pub(crate) route: String,
    /// The hedge delay, or `None` when this request is never hedged.
    pub(crate) delay: Option<DelayChoice>,
    /// Classic timeout-and-retry instead of a hedge: the timer abandons the
    /// primary, and the retry is not charged to the hedge budget.
    pub(crate) retry: bool,
    /// Why this request is never hedged (for `Server-Timing`), when it is not.
    pub(crate) hedge_skip: Option<&'static str>,
    /// Client path, appended to the origin base URL.
    pub(crate) path: String,
    /// Client query string, without the `?`.
    pub(crate) query: Option<String>,
    /// Hedgeable only through its idempotency key: the hedge must go to
    /// another origin, never the primary's own.
    pub(crate) keyed: bool,
}

/// What one leg did, for headers, error bodies and logs.
#[derive(Debug, Default)]
pub(crate) struct LegReport {
    pub(crate) origin: usize,
    pub(crate) started_ms: Option<f64>,
    pub(crate) finished_ms: Option<f64>,
    pub(crate) status: Option<u16>,
    pub(crate) error: Option<String>,
    pub(crate) aborted: bool,
}

impl LegReport {
    /// Milliseconds from the leg's start to its headers (or to `now_ms` if unfinished).
    pub(crate) fn elapsed_ms(&self, now_ms: f64) -> Option<f64> {
        self.started_ms
            .map(|start| self.finished_ms.unwrap_or(now_ms) - start)
    }
}

/// How the race ended.
#[derive(Debug)]
pub(crate) enum RaceEnd {
    /// A leg answered; its response goes to the client.
    Won(Leg, web_sys::Response),
    /// Only the primary ran and it failed retriably: its response (if it got
    /// one) goes to the client as it is.
    PrimaryFailed(Option<web_sys::Response>),
    /// Both legs failed retriably.
    BothFailed,
    /// No leg answered within the timeout.
    TimedOut,
    /// The client went away first: both legs were aborted, and nobody reads
    /// the answer.
    ClientGone,
}

/// The race's result and what each leg did.
#[derive(Debug)]
pub(crate) struct RaceReport {
    pub(crate) end: RaceEnd,
    pub(crate) hedge_sent: bool,
    /// Set when a hedge was wanted but refused, with the reason.
    pub(crate) hedge_denied: Option<HedgeDenied>,
    pub(crate) primary: LegReport,
    pub(crate) hedge: LegReport,
    /// The winning leg's controller: aborting it stops the origin's body
    /// (for the body idle timeout, which may cut it after the race).
    pub(crate) winner_controller: Option<web_sys::AbortController>,
}

enum Event {
    Finished(Leg, worker::Result<web_sys::Response>),
    ClientGone,
    HedgeTimer,
    Deadline,
}

type LegFuture = Fuse<LocalBoxFuture<'static, worker::Result<web_sys::Response>>>;

/// Runs the race for `outbound` under `plan`. `client_gone` resolves when
/// the client disconnects.
///
/// An `Err` is the Worker's own failure (the outbound request could not be
/// built): no origin was asked, and none is blamed.
pub(crate) async fn run(
    params: &Params,
    plan: &RacePlan,
    outbound: &mut OutboundRequest,
    client_gone: LocalBoxFuture<'static, ()>,
    now_ms: impl Fn() -> f64,
) -> worker::Result<RaceReport> {
    let primary_url = upstream_url(
        &params.origins[plan.primary].base_url,
        &plan.path,
        plan.query.as_deref(),
    );

    // One controller per leg, so aborting the loser leaves the winner alone.
    // The hedge's is made only when a hedge goes out.
    let primary_controller = web_sys::AbortController::new()?;
    let primary_signal = primary_controller.signal();
    let mut primary_ctl = Some(primary_controller);
    let mut hedge_ctl: Option<web_sys::AbortController> = None;

    let mut report = RaceReport {
        end: RaceEnd::TimedOut,
        hedge_sent: false,
        hedge_denied: None,
        winner_controller: None,
        primary: LegReport {
            origin: plan.primary,
            ..LegReport::default()
        },
        hedge: LegReport {
            origin: plan.primary,
            ..LegReport::default()
        },
    };
    let mut race = if plan.retry {
        Race::retry(plan.delay.is_some())
    } else {
        Race::new(plan.delay.is_some())
    };
    let mut responses: [Option<web_sys::Response>; 2] = [None, None];

    report.primary.started_ms = Some(now_ms());
    let primary_fetch = leg::send(&primary_url, outbound, Leg::Primary, &primary_signal)?;
    let mut primary_fut: LegFuture = primary_fetch.boxed_local().fuse();
    let mut hedge_fut: LegFuture = Fuse::terminated();
    let mut timer = match plan.delay {
        Some(choice) => delay(choice.delay_ms).fuse(),
        None => Fuse::terminated(),
    };
    let mut deadline = delay(params.timeout_ms).fuse();
    let mut client_gone = client_gone.fuse();

    loop {
        // Biased, in this order: an answer that is ready wins over a timer
        // that is ready at the same moment (no needless hedge, no needless
        // 504), and a client that is gone stops the timers from acting.
        let event = futures::select_biased! {
            r = primary_fut => Event::Finished(Leg::Primary, r),
            r = hedge_fut => Event::Finished(Leg::Hedge, r),
            _ = client_gone => Event::ClientGone,
            _ = timer => Event::HedgeTimer,
            _ = deadline => Event::Deadline,
            complete => Event::Deadline,
        };
        let now = now_ms();
        let mut step = match event {
            Event::Finished(leg, result) => {
                let leg_report = report.leg_mut(leg);
                leg_report.finished_ms = Some(now);
                let (outcome, health) = match &result {
                    Ok(response) => {
                        let status = response.status();
                        leg_report.status = Some(status);
                        let health = match status {
                            s if leg == Leg::Hedge && hedge_refused(s) => Outcome::Shed,
                            500.. => Outcome::ServerError,
                            _ => Outcome::Success,
                        };
                        (classify_status(leg, status), health)
                    }
                    Err(e) => {
                        leg_report.error = Some(e.to_string());
                        (LegOutcome::RetriableFailure, Outcome::Unreachable)
                    }
                };
                let origin = leg_report.origin;
                isolate::with_ready(|ready| {
                    ready.gate.record(origin, health, now);
                    let server_error = !matches!(health, Outcome::Success);
                    ready.pop.record_response(origin, server_error);
                });
                responses[leg_index(leg)] = result.ok();
                race.leg_finished(leg, outcome)
            }
            Event::HedgeTimer => race.timer_fired(),
            Event::ClientGone => {
                // Nobody will read the answer: every millisecond a leg runs
                // now is wasted origin work. Losing to a gone client says
                // nothing about an origin.
                for leg in [Leg::Primary, Leg::Hedge] {
                    if race.is_pending(leg) {
                        cut_short(plan, &mut report, leg, now, CutShort::Lost);
                    }
                }
                abort(&mut primary_ctl);
                abort(&mut hedge_ctl);
                report.end = RaceEnd::ClientGone;
                return Ok(report);
            }
            Event::Deadline => {
                for leg in [Leg::Primary, Leg::Hedge] {
                    if race.is_pending(leg) {
                        cut_short(plan, &mut report, leg, now, CutShort::TimedOut);
                    }
                }
                abort(&mut primary_ctl);
                abort(&mut hedge_ctl);
                report.end = RaceEnd::TimedOut;
                return Ok(report);
            }
        };
        if step == Step::AbandonPrimaryAndRetry {
            abort(&mut primary_ctl);
            // For a timeout-and-retry client, the timeout is the primary's failure.
            cut_short(plan, &mut report, Leg::Primary, now, CutShort::TimedOut);
            step = Step::StartHedge;
        }
        if step == Step::StartHedge {
            let permit = isolate::with_ready(|ready| {
                if plan.keyed {
                    ready.gate.permit_to_peer(plan.primary, now)
                } else {
                    ready.gate.permit(plan.primary, now, !plan.retry)
                }
            })
            .unwrap_or(Err(HedgeDenied::NoTarget));
            let started = match permit {
                Ok(target) => {
                    let url = upstream_url(
                        &params.origins[target].base_url,
                        &plan.path,
                        plan.query.as_deref(),
                    );
                    report.hedge.origin = target;
                    let sent = web_sys::AbortController::new().ok().and_then(|controller| {
                        let fetch =
                            leg::send(&url, outbound, Leg::Hedge, &controller.signal()).ok()?;
                        hedge_ctl = Some(controller);
                        Some(fetch)
                    });
                    if sent.is_none() {
                        // The Worker could not build the copy: the origin was
                        // never asked, so it is not blamed, and a recovery
                        // trial the permit claimed for it is given back.
                        isolate::with_ready(|ready| ready.gate.abandoned(target, now));
                    }
                    sent
                }
                Err(reason) => {
                    report.hedge_denied = Some(reason);
                    None
                }
            };
            step = match started {
                Some(fetch) => {
                    hedge_fut = fetch.boxed_local().fuse();
                    report.hedge.started_ms = Some(now);
                    report.hedge_sent = true;
                    isolate::with_ready(|ready| ready.pop.record_hedge());
                    race.hedge_started();
                    Step::Wait
                }
                None => race.hedge_declined(),
            };
        }
        match step {
            Step::Wait | Step::StartHedge | Step::AbandonPrimaryAndRetry => continue,
            Step::Deliver(winner) => {
                let loser = winner.other();
                // Abort first: every millisecond the loser runs is wasted origin work.
                // A failed loser's body is not needed either.
                abort(controller(loser, &mut primary_ctl, &mut hedge_ctl));
                if race.is_pending(loser) {
                    cut_short(plan, &mut report, loser, now, CutShort::Lost);
                }
                record(plan, &report, winner, now, false);
                let response = responses[leg_index(winner)]
                    .take()
                    .ok_or_else(|| worker::Error::RustError("winner without a response".into()))?;
                report.end = RaceEnd::Won(winner, response);
                report.winner_controller =
                    controller(winner, &mut primary_ctl, &mut hedge_ctl).take();
                return Ok(report);
            }
            Step::DeliverPrimaryFailure => {
                report.end = RaceEnd::PrimaryFailed(responses[0].take());
                return Ok(report);
            }
            Step::FailBoth => {
                abort(&mut primary_ctl);
                abort(&mut hedge_ctl);
                report.end = RaceEnd::BothFailed;
                return Ok(report);
            }
        }
    }
}

// === impl RaceReport ===

impl RaceReport {
    pub(crate) fn leg(&self, leg: Leg) -> &LegReport {
        match leg {
            Leg::Primary => &self.primary,
            Leg::Hedge => &self.hedge,
        }
    }

    fn leg_mut(&mut self, leg: Leg) -> &mut LegReport {
        match leg {
            Leg::Primary => &mut self.primary,
            Leg::Hedge => &mut self.hedge,
        }
    }
}

fn leg_index(leg: Leg) -> usize {
    match leg {
        Leg::Primary => 0,
        Leg::Hedge => 1,
    }
}

fn controller<'a>(
    leg: Leg,
    primary: &'a mut Option<web_sys::AbortController>,
    hedge: &'a mut Option<web_sys::AbortController>,
) -> &'a mut Option<web_sys::AbortController> {
    match leg {
        Leg::Primary => primary,
        Leg::Hedge => hedge,
    }
}

fn abort(controller: &mut Option<web_sys::AbortController>) {
    if let Some(c) = controller.take() {
        c.abort();
    }
}

fn delay(ms: f64) -> LocalBoxFuture<'static, ()> {
    Delay::from(Duration::from_millis(ms.max(0.0).round() as u64)).boxed_local()
}

/// Why a leg in flight was cut short.
#[derive(Clone, Copy)]
enum CutShort {
    /// Its time ran out: a failure of its origin.
    TimedOut,
    /// The other leg won: says nothing about its origin.
    Lost,
}

/// Books a leg aborted before it answered (its controller is the caller's):
/// its elapsed time as a censored latency sample, and what it says about
/// its origin's health.
fn cut_short(plan: &RacePlan, report: &mut RaceReport, leg: Leg, now_ms: f64, why: CutShort) {
    record(plan, report, leg, now_ms, true);
    let leg_report = report.leg_mut(leg);
    leg_report.aborted = true;
    let origin = leg_report.origin;
    isolate::with_ready(|ready| match why {
        CutShort::TimedOut => {
            ready.gate.record(origin, Outcome::Unreachable, now_ms);
            ready.pop.record_response(origin, true);
        }
        CutShort::Lost => ready.gate.abandoned(origin, now_ms),
    });
}

/// Records a leg's latency: a completion, or (for a leg cut short) a lower bound.
fn record(plan: &RacePlan, report: &RaceReport, leg: Leg, now_ms: f64, censored: bool) {
    let leg_report = report.leg(leg);
    let Some(elapsed) = leg_report.elapsed_ms(now_ms) else {
        return;
    };
    let sample = if censored {
        Sample::Censored(elapsed)
    } else {
        Sample::Completed(elapsed)
    };
    isolate::with_ready(|ready| {
        ready
            .estimator
            .record(leg_report.origin, &plan.route, sample, now_ms);
        ready
            .pop
            .record_sample(leg_report.origin, &plan.route, sample);
    });
}
