//! Runs one hedged race: primary fetch, hedge timer, hedge fetch, first answer wins.
//!
//! Every decision comes from the isolate; this module only does the I/O: it
//! sends legs, waits on whichever event comes first and hands it over (one
//! call per event), then carries out the order it gets back: abort legs
//! (each through its own `AbortController`), send the hedge, end.

use std::rc::Rc;
use std::time::Duration;

use futures::future::{Fuse, FutureExt, LocalBoxFuture};
use worker::{web_sys, Delay};

use super::clock::now_ms;
use super::connections::{Connections, Slot};
use super::head;
use super::isolate::Shared;
use super::leg::{self, OutboundBody, OutboundRequest};
use hedgehog_core::edge::{
    Answer, Completion, EntryHead, Exchange, HeaderList, Leg, LegRequest, RaceEnd, RaceEvent,
    RacePlan, RaceState, INVALID_STATUS,
};

/// How the race ended, with the response that goes to the client.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// A leg answered; its response goes to the client.
    Won(web_sys::Response),
    /// Only the primary ran and it failed retriably: its response (if it got
    /// one) goes to the client as it is.
    PrimaryFailed(Option<web_sys::Response>),
    /// Both legs failed retriably; the origin's own answer of the leg the
    /// Hedger picked goes to the client as it is, when an origin answered.
    BothFailed(Option<(Leg, web_sys::Response)>),
    /// No leg answered within the timeout.
    TimedOut,
    /// The client went away first; nobody reads the answer.
    ClientGone,
}

/// The race's result: how it ended and what each leg did.
#[derive(Debug)]
pub(crate) struct RaceReport {
    pub(crate) outcome: Outcome,
    /// The Hedger's record of the race (plan, legs, why no hedge).
    pub(crate) state: RaceState,
    /// The winning leg's controller: aborting it stops the origin's body
    /// (for the body idle timeout, which may cut it after the race).
    pub(crate) winner_controller: Option<web_sys::AbortController>,
}

impl RaceReport {
    /// The response that goes to the client, when an origin answered.
    pub(crate) fn kept_response(&self) -> Option<&web_sys::Response> {
        match &self.outcome {
            Outcome::Won(response)
            | Outcome::PrimaryFailed(Some(response))
            | Outcome::BothFailed(Some((_, response))) => Some(response),
            _ => None,
        }
    }

    /// The isolate's completion of `exchange`'s race, handed the kept
    /// response's status and header fields (read here, once) and what it
    /// reads of the request (`asked`); `analytics` when a dataset is bound.
    pub(crate) fn complete(
        &self,
        isolate: &Shared,
        exchange: &Exchange,
        asked: Asked<'_>,
        analytics: bool,
    ) -> Completion {
        let kept = self.kept_response();
        let status = kept.map(web_sys::Response::status);
        // Read once: every rule reads it in the core (a `304`'s merge too).
        let kept_head = kept.map(|r| head::read(&r.headers())).unwrap_or_default();
        let answer = Answer {
            status,
            headers: &kept_head,
            request: asked.head,
            generation: asked.generation,
            stale_if_error: asked.stale_if_error,
            revalidated: asked.revalidated,
            analytics,
        };
        (isolate.borrow_mut()).complete(exchange, &self.state, &answer, asked.url, now_ms())
    }
}

/// What a completion reads of the request besides its exchange.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked<'a> {
    /// The request's URL.
    pub(crate) url: &'a str,
    /// Its header fields.
    pub(crate) head: &'a HeaderList,
    /// The generation of the URL's stored variants its lookup found.
    pub(crate) generation: Option<&'a str>,
    /// A stale entry that may stand in for a failure: its status and fields.
    pub(crate) stale_if_error: Option<(u16, &'a EntryHead)>,
    /// The stored entry the legs asked about with its validators: its
    /// status and fields.
    pub(crate) revalidated: Option<(u16, &'a EntryHead)>,
}

/// The I/O side of one leg: its fetch, its abort controller and its answer.
struct LegIo {
    future: Fuse<LocalBoxFuture<'static, worker::Result<web_sys::Response>>>,
    controller: Option<web_sys::AbortController>,
    response: Option<web_sys::Response>,
    /// The leg a third attempt replaced, kept while its origin's failure
    /// answer is the one the client may still get.
    replaced: Option<Box<LegIo>>,
}

impl LegIo {
    fn idle() -> Self {
        Self {
            future: Fuse::terminated(),
            controller: None,
            response: None,
            replaced: None,
        }
    }

    /// Sends `request` as `leg` in `slot` (given back when its headers, or
    /// its failure, arrive); `Err` when the Worker could not build it.
    fn send(
        request: &LegRequest,
        outbound: &mut OutboundRequest,
        leg: Leg,
        slot: Slot,
    ) -> worker::Result<Self> {
        let controller = web_sys::AbortController::new()?;
        // A body streamed from the client goes to this leg alone: if it
        // breaks off, the leg is cut (the origin must never see an end).
        if matches!(outbound.body, OutboundBody::Stream(Some(_))) {
            outbound.client_body.attach(&controller);
        }
        let fetch = leg::send(request, outbound, leg, &controller.signal())?;
        let fetch = async move {
            let answer = fetch.await;
            drop(slot);
            answer
        };
        Ok(Self {
            future: fetch.boxed_local().fuse(),
            controller: Some(controller),
            response: None,
            replaced: None,
        })
    }

    /// Aborts the leg's fetch (its request, or its body if it answered),
    /// and the attempt it replaced.
    fn abort(&mut self) {
        if let Some(c) = self.controller.take() {
            c.abort();
        }
        if let Some(mut replaced) = self.replaced.take() {
            replaced.abort();
        }
    }

    /// Its answer, or (when it got none) the answer of the attempt it
    /// replaced, with the controller of the leg it came from.
    fn take_answer(&mut self) -> (Option<web_sys::Response>, Option<web_sys::AbortController>) {
        match self.response.take() {
            Some(response) => {
                if let Some(mut replaced) = self.replaced.take() {
                    replaced.abort();
                }
                (Some(response), self.controller.take())
            }
            None => match self.replaced.take() {
                Some(mut replaced) => (replaced.response.take(), replaced.controller.take()),
                None => (None, self.controller.take()),
            },
        }
    }
}

enum Event {
    Finished(Leg, worker::Result<web_sys::Response>),
    ClientGone,
    HedgeTimer,
    Deadline,
}

/// Runs `exchange`'s race for `outbound` under `plan`. `client` is the
/// incoming request's signal, aborted when the client disconnects.
///
/// An `Err` is the Worker's own failure (the primary request could not be
/// built): no origin was asked, and none is blamed.
pub(crate) async fn run(
    isolate: &Shared,
    plan: RacePlan,
    exchange: &Exchange,
    outbound: &mut OutboundRequest,
    client: &web_sys::AbortSignal,
    connections: &Rc<Connections>,
) -> worker::Result<RaceReport> {
    let delay_ms = plan.first_timer_ms();
    // The primary waits its turn for a connection (before the race's clock
    // starts); a hedge that finds none free is not sent.
    let slot = connections.take().await;
    // The race starts as the primary goes out.
    let (mut state, primary) = isolate.borrow_mut().start(plan, exchange, now_ms());
    // One controller per leg, so aborting the loser leaves the winner alone.
    let primary = match LegIo::send(&primary, outbound, Leg::Primary, slot) {
        Ok(primary) => primary,
        Err(e) => {
            isolate.borrow_mut().primary_not_sent(&mut state, now_ms());
            return Err(e);
        }
    };
    let mut legs = [primary, LegIo::idle()];
    let mut timer = RaceTimer::new(delay_ms, state.plan.timeout_ms, now_ms());
    // No listener on the client's disconnect: when the client leaves,
    // workerd cancels the invocation and its subrequests itself (the legs
    // are aborted at the origins with or without one:
    // tests/request_safety.test.mjs), and a listener cost a promise and two
    // closures a request. What the race sees is the signal's state: a client
    // already gone when the hedge timer fires gets no hedge.
    loop {
        let event = next_event(&mut legs, &mut timer).await;
        // A leg that failed while the client's body streamed to it: was it
        // the client's upload that broke? (Known within microtasks.)
        let body_broke = match &event {
            Event::Finished(_, Err(_)) => outbound.client_body.verdict().await,
            _ => false,
        };
        let event = race_event(event, &mut legs, client, body_broke);
        let mut order = (isolate.borrow_mut()).handle(exchange, &mut state, event, now_ms());
        // Carried out in the order the isolate gives: aborts first.
        loop {
            for leg in &order.abort {
                legs[leg.index()].abort();
            }
            if let Some(end) = order.end {
                return Ok(finish(end, state, legs));
            }
            // A stall check that found none: the hedge timer runs on.
            if let Some(ms) = order.rearm_ms {
                timer.rearm_hedge(ms, now_ms());
            }
            let Some(hedge) = order.send_hedge.take() else {
                break;
            };
            if send_hedge(&mut legs, &hedge, outbound, connections) {
                isolate.borrow_mut().hedge_sent(&mut state, now_ms());
                break;
            }
            order = (isolate.borrow_mut()).hedge_not_sent(exchange, &mut state, now_ms());
        }
    }
}

/// The race's one runtime timer, set for the hedge timer while that is due
/// before the deadline, then for the deadline: a request answered before
/// its hedge delay sets and clears one `setTimeout`, not two (each is a
/// closure and two calls into JavaScript).
struct RaceTimer {
    /// When the hedge timer is due (ms on the Worker's clock), while it is set.
    hedge_at: Option<f64>,
    deadline_at: f64,
    armed: Fuse<LocalBoxFuture<'static, ()>>,
}

impl RaceTimer {
    fn new(hedge_ms: Option<f64>, timeout_ms: f64, now_ms: f64) -> Self {
        let mut timer = Self {
            hedge_at: hedge_ms.map(|ms| now_ms + ms),
            deadline_at: now_ms + timeout_ms,
            armed: Fuse::terminated(),
        };
        timer.arm(now_ms);
        timer
    }

    /// Sets the runtime timer for whichever is due first.
    fn arm(&mut self, now_ms: f64) {
        let at = match self.hedge_at {
            Some(at) if at < self.deadline_at => at,
            _ => self.deadline_at,
        };
        self.armed = delay(at - now_ms).fuse();
    }

    /// The runtime timer fired: which of the two it was. The deadline's
    /// timer is set again after the hedge timer's.
    fn fired(&mut self, now_ms: f64) -> Event {
        match self.hedge_at.take() {
            Some(at) if at < self.deadline_at => {
                self.arm(now_ms);
                Event::HedgeTimer
            }
            _ => Event::Deadline,
        }
    }

    /// Sets the hedge timer again, `ms` from now (a stall check that found none).
    fn rearm_hedge(&mut self, ms: f64, now_ms: f64) {
        self.hedge_at = Some(now_ms + ms);
        self.arm(now_ms);
    }
}

/// Whichever comes first: a leg's answer, the hedge timer, the deadline.
async fn next_event(legs: &mut [LegIo; 2], timer: &mut RaceTimer) -> Event {
    let [primary, hedge] = legs;
    // Biased, in this order: an answer that is ready wins over a timer that
    // is ready at the same moment (no needless hedge, no needless 504).
    futures::select_biased! {
        r = &mut primary.future => Event::Finished(Leg::Primary, r),
        r = &mut hedge.future => Event::Finished(Leg::Hedge, r),
        _ = &mut timer.armed => timer.fired(now_ms()),
        complete => Event::Deadline,
    }
}

/// The core's view of an event; an answer's response is kept in its leg.
fn race_event(
    event: Event,
    legs: &mut [LegIo; 2],
    client: &web_sys::AbortSignal,
    body_broke: bool,
) -> RaceEvent {
    // A leg that failed because the client went away, or because its
    // upload broke off, says nothing about the origin: the client ended
    // the exchange. A hedge for a client that is gone is never sent.
    let event = match event {
        Event::Finished(_, Err(_)) if body_broke => Event::ClientGone,
        Event::Finished(_, Err(_)) | Event::HedgeTimer if client.aborted() => Event::ClientGone,
        other => other,
    };
    match event {
        Event::Finished(leg, result) => {
            let answer = match result {
                // No response can be built with it (workerd hands on an
                // origin's `999` or a lone `103` as final): the origin gave
                // no usable answer.
                Ok(response) if !(200..=599).contains(&response.status()) => {
                    Err(format!("{INVALID_STATUS}: {}", response.status()))
                }
                Ok(response) => {
                    let status = response.status();
                    legs[leg.index()].response = Some(response);
                    Ok(status)
                }
                Err(e) => Err(e.to_string()),
            };
            RaceEvent::Answered(leg, answer)
        }
        Event::HedgeTimer => RaceEvent::TimerFired,
        Event::ClientGone => RaceEvent::ClientGone,
        Event::Deadline => RaceEvent::DeadlinePassed,
    }
}

/// Sends `hedge` into the hedge leg; `false` when it could not go out
/// (no connection free, or the Worker could not build it).
fn send_hedge(
    legs: &mut [LegIo; 2],
    hedge: &LegRequest,
    outbound: &mut OutboundRequest,
    connections: &Rc<Connections>,
) -> bool {
    // Six subrequests waiting already: a hedge that queued behind them
    // would come too late to help.
    let Some(slot) = connections.try_take() else {
        return false;
    };
    match LegIo::send(hedge, outbound, Leg::Hedge, slot) {
        Ok(sent) => {
            // A third attempt replaces a hedge that failed. Its origin's
            // answer is kept while the client may still need it (no other
            // answer to fall back on); otherwise it is released.
            let mut failed = std::mem::replace(&mut legs[Leg::Hedge.index()], sent);
            let primary_answered = legs[Leg::Primary.index()].response.is_some();
            if failed.response.is_some() && !primary_answered {
                legs[Leg::Hedge.index()].replaced = Some(Box::new(failed));
            } else {
                failed.abort();
            }
            true
        }
        Err(_) => false,
    }
}

/// The race's report: the kept leg's response (the others were aborted
/// when the race ended).
fn finish(end: RaceEnd, state: RaceState, mut legs: [LegIo; 2]) -> RaceReport {
    let mut take = |leg: Leg| legs[leg.index()].take_answer();
    let (outcome, winner_controller) = match end {
        RaceEnd::Won(leg) => match take(leg) {
            (Some(response), controller) => (Outcome::Won(response), controller),
            // A leg wins only on an answer, which is stored before the
            // Hedger hears of it; were it missing, the client gets the 502
            // that both legs failing gives, not a panic.
            (None, _) => (Outcome::BothFailed(None), None),
        },
        RaceEnd::PrimaryFailed => (Outcome::PrimaryFailed(take(Leg::Primary).0), None),
        RaceEnd::BothFailed {
            answered: Some(leg),
        } => match take(leg) {
            (Some(response), controller) => {
                (Outcome::BothFailed(Some((leg, response))), controller)
            }
            (None, _) => (Outcome::BothFailed(None), None),
        },
        RaceEnd::BothFailed { answered: None } => (Outcome::BothFailed(None), None),
        RaceEnd::TimedOut => (Outcome::TimedOut, None),
        RaceEnd::ClientGone => (Outcome::ClientGone, None),
    };
    RaceReport {
        outcome,
        state,
        winner_controller,
    }
}

fn delay(ms: f64) -> LocalBoxFuture<'static, ()> {
    Delay::from(Duration::from_millis(ms.max(0.0).round() as u64)).boxed_local()
}
