//! The proxy pipeline: the isolate's steps before the race (body, a
//! coalesced flight, the cache), the race, the completion, the response.
//! Every decision, and the order of the steps, is the [`Isolate`]'s; each
//! step here converts types and does the I/O.
//!
//! [`Isolate`]: hedgehog_core::isolate::Isolate

use std::time::Duration;

use worker::{console_error, web_sys, Context, Delay, Env};

use super::cache::{self, Entry};
use super::client::Client;
use super::clock::now_ms;
use super::coalesce::LeaderGuard;
use super::exchange::{after_race, outbound, Io, Miss, Stale};
use super::isolate::Shared;
use super::leg::OutboundBody;
use super::race::{self, Outcome, RaceReport};
use super::refresh;
use super::reply::{self, Failure, Timing};
use super::request_body::{self, BodyRead, ClientBodyFault, HeldClaim};
use hedgehog_core::edge::{
    BodyPlan, Exchange, NotHedgeableReason, RacePlan, Role, ServeEntry, Step,
};

/// How much of a refused GET/HEAD body is read (and dropped) before the 400.
const REFUSED_BODY_DRAIN_BYTES: usize = 64 * 1024;

/// The 400's message for a body that broke off on the client's side.
const BODY_BROKE: &str =
    "the request body broke off before its end (fewer bytes than Content-Length, or a bad chunk)";

/// Proxies an exchange the isolate accepted, whose first step is `first`.
pub(crate) async fn run(
    client: Client<'_>,
    env: &Env,
    ctx: &Context,
    isolate: &Shared,
    mut exchange: Exchange,
    first: Step,
) -> worker::Result<web_sys::Response> {
    let io = Io {
        client,
        env,
        ctx,
        isolate,
    };
    let request_id = exchange.request_id.clone();
    let mut held = HeldClaim::new(isolate);
    let fault = ClientBodyFault::default();
    // The steps before the race are boxed: inline, their state would be
    // held through the whole race.
    let before = before_race(io, &mut exchange, first, &mut held, &fault);
    let (plan, miss) = match Box::pin(before).await {
        Ok(ready) => ready,
        Err(answered) => return answered,
    };
    if client.req.signal().aborted() {
        return Failure::ClientGone.response(&request_id);
    }
    let (mut outbound, miss) = outbound(client, &exchange, fault, miss)?;
    let signal = client.req.signal();
    let report = race::run(
        isolate,
        plan,
        &exchange,
        &mut outbound,
        &signal,
        client.connections,
    )
    .await;
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            // The Worker's own failure: no origin was asked or is blamed.
            console_error!("hedgehog-edge: request {request_id}: could not send: {e}");
            return Failure::Internal.response(&request_id);
        }
    };
    drop(held);
    if matches!(report.outcome, Outcome::ClientGone) {
        // A streamed upload that broke off is the client's error, answered
        // (when the client still listens) like any other bad request.
        if outbound.client_body.broke() && !client.req.signal().aborted() {
            return Failure::BadRequest(BODY_BROKE).response(&request_id);
        }
        return Failure::ClientGone.response(&request_id);
    }
    // Boxed: inline, its state (1.2 KB) would be held through the race.
    Box::pin(finish(io, &exchange, report, miss)).await
}

/// Carries out the isolate's steps from `first` until the race: read the
/// body, wait on a coalesced flight, look in the cache, each handed back
/// as the isolate asks. `Ok` with the race's plan and what it needs of the
/// steps; `Err` with the response when the exchange is answered before it
/// (from the cache, a refused body, a client gone while it waited).
async fn before_race(
    io: Io<'_>,
    exchange: &mut Exchange,
    first: Step,
    held: &mut HeldClaim,
    fault: &ClientBodyFault,
) -> Result<(RacePlan, Miss), worker::Result<web_sys::Response>> {
    let Io {
        client, isolate, ..
    } = io;
    // Taken at once: a refused request releases its flight as it returns.
    let leader = match exchange.role {
        Role::Leader(id) => Some(LeaderGuard::new(isolate, client.url, id)),
        _ => None,
    };
    let mut miss = Miss::new(leader, Vec::new());
    let mut found = None;
    let mut polls = 0u32;
    let mut step = first;
    loop {
        step = match step {
            Step::ReadBody => {
                let read = read_body(client, exchange, held, fault).await;
                let (body, streamed) = read.map_err(|message| {
                    // Its upload broke off because the client left: nobody reads a 400.
                    let failure = match client.req.signal().aborted() {
                        true => Failure::ClientGone,
                        false => Failure::BadRequest(message),
                    };
                    failure.response(&exchange.request_id)
                })?;
                miss.body = body;
                isolate.borrow_mut().body_read(exchange, streamed)
            }
            // Waiters poll on their own timers instead of being woken by
            // the leader: a wake-up from the leader would run the waiter's
            // code inside the leader's request, which the runtime does not
            // allow to do I/O for another request.
            Step::Wait { ms } => {
                Delay::from(Duration::from_millis(ms as u64)).await;
                if client.req.signal().aborted() {
                    return Err(Failure::ClientGone.response(&exchange.request_id));
                }
                polls = polls.saturating_add(1);
                (isolate.borrow_mut()).flight_polled(exchange, client.url, polls, now_ms())
            }
            Step::LookUp { coalesced } => {
                let lookup = cache::lookup(client.url, client.head, client.connections).await;
                miss.generation = lookup.generation;
                found = lookup.entry;
                let head = found.as_ref().map(|entry| &entry.head);
                let url = client.url;
                (isolate.borrow_mut()).found(exchange, head, client.head, url, coalesced)
            }
            Step::Serve(serve) => {
                // Served only from an entry found: without one, the
                // client gets the Worker's own 500, never a panic.
                let Some(entry) = found.take() else {
                    return Err(Failure::Internal.response(&exchange.request_id));
                };
                return Err(serve_entry(io, exchange, serve, entry, miss.leader));
            }
            Step::Race { plan, stale } => {
                if let (Some(stale), Some(entry)) = (stale, found) {
                    miss.validators = stale.validators;
                    miss.stale = Some(Stale {
                        entry,
                        if_error: stale.if_error,
                    });
                }
                return Ok((plan, miss));
            }
        };
    }
}

/// The body the legs send, and why it goes streamed and unhedged when it
/// outgrew a cap; `Err` with the 400's message for a GET or HEAD whose body
/// held bytes, or a held body that broke off.
async fn read_body(
    client: Client<'_>,
    exchange: &Exchange,
    held: &mut HeldClaim,
    fault: &ClientBodyFault,
) -> Result<(OutboundBody, Option<NotHedgeableReason>), &'static str> {
    let declared = exchange.declared_length;
    Ok(match exchange.body {
        BodyPlan::Empty => (OutboundBody::Empty, None),
        // GET and HEAD carry no body: an empty one is dropped, a real one refused.
        BodyPlan::Drain { refuse } => {
            let had_bytes = request_body::drain_up_to(client.req, REFUSED_BODY_DRAIN_BYTES).await;
            if had_bytes || refuse {
                return Err("a GET or HEAD request must not carry a body");
            }
            (OutboundBody::Empty, None)
        }
        // Held for the hedge; one that outgrows a cap goes once, streamed.
        // Read before an origin is chosen: a client that hangs up
        // mid-upload has then claimed nothing from any origin.
        BodyPlan::Hold { cap } => {
            match request_body::read_up_to(client.req, cap, declared, held, fault).await {
                BodyRead::Held(bytes) => (OutboundBody::Buffered(bytes), None),
                BodyRead::Streamed(stream, reason) => {
                    (OutboundBody::Stream(Some(stream)), Some(reason))
                }
                BodyRead::Broken => return Err(BODY_BROKE),
            }
        }
        BodyPlan::Stream => {
            let body = (client.req.body())
                .map(|raw| request_body::forward(&raw, declared, fault).unwrap_or(raw));
            (OutboundBody::Stream(body), None)
        }
    })
}

/// The cache's answer, as the isolate's `serve` says: the `entry` found,
/// rebuilt for the client; a leader's flight is stored (its waiters read
/// the entry at once) and a refresh it claimed runs in the background.
fn serve_entry(
    io: Io<'_>,
    exchange: &Exchange,
    serve: ServeEntry,
    entry: Entry,
    leader: Option<LeaderGuard>,
) -> worker::Result<web_sys::Response> {
    if let Some(leader) = leader {
        leader.disarm();
    }
    if let Some(refresh) = serve.refresh {
        refresh::spawn(io, *refresh);
    }
    let timing = Timing {
        start_ms: exchange.started_ms,
        now_ms: now_ms(),
    };
    let how = serve.how;
    cache::rebuilt(&entry, &serve.edits, serve.not_modified)
        .and_then(|served| reply::cache_hit_response(served, how, &exchange.request_id, timing))
}

/// After the race: the steps the core orders ([`after_race`]); a client's
/// request always ends in a response.
async fn finish(
    io: Io<'_>,
    exchange: &Exchange,
    report: RaceReport,
    miss: Miss,
) -> worker::Result<web_sys::Response> {
    after_race(io, exchange, report, miss)
        .await?
        .ok_or_else(|| {
            worker::Error::RustError("a client's request ended without a response".into())
        })
}
