//! The proxy pipeline: the isolate's steps before the race (body, a
//! coalesced flight, the cache), the race, the completion, the response.
//! Every decision, and the order of the steps, is the [`Isolate`]'s; each
//! step here converts types and does the I/O.
//!
//! [`Isolate`]: hedgehog_core::isolate::Isolate

use std::time::Duration;

use worker::{console_error, console_warn, web_sys, Context, Delay, Env};

use super::cache::{self, Entry};
use super::client::Client;
use super::clock::now_ms;
use super::coalesce::LeaderGuard;
use super::isolate::Shared;
use super::leg::{self, OutboundBody, OutboundRequest};
use super::race::{self, Asked, Outcome, RaceReport};
use super::reply::{self, Failure, Timing};
use super::request_body::{self, BodyRead, ClientBodyFault, HeldClaim};
use super::{analytics, pop, refresh, request_log};
use hedgehog_core::edge::{
    BodyPlan, Completion, Exchange, NotHedgeableReason, RacePlan, Refresh, Role, ServeEntry,
    Served, Step,
};

/// How much of a refused GET/HEAD body is read (and dropped) before the 400.
const REFUSED_BODY_DRAIN_BYTES: usize = 64 * 1024;

/// The 400's message for a body that broke off on the client's side.
const BODY_BROKE: &str =
    "the request body broke off before its end (fewer bytes than Content-Length, or a bad chunk)";

/// What the steps before the race left for it: the body the legs send, a
/// stale entry, the fields the legs revalidate it with, the variants'
/// generation, the flight to lead.
struct Miss {
    body: OutboundBody,
    stale: Option<Stale>,
    validators: Vec<(&'static str, String)>,
    generation: Option<String>,
    leader: Option<LeaderGuard>,
}

impl Miss {
    /// Nothing found yet: no body, no entry; the flight `leader` leads, the
    /// fields the legs revalidate with.
    fn new(leader: Option<LeaderGuard>, validators: Vec<(&'static str, String)>) -> Self {
        Self {
            body: OutboundBody::Empty,
            stale: None,
            validators,
            generation: None,
            leader,
        }
    }
}

/// A stored entry too stale to serve, and whether it may stand in for a
/// failure.
#[derive(Debug)]
struct Stale {
    entry: Entry,
    if_error: bool,
}

/// What the pipeline does its I/O with: the client's request, the Worker's
/// bindings and invocation, the isolate.
#[derive(Clone, Copy)]
pub(crate) struct Io<'a> {
    pub(crate) client: Client<'a>,
    pub(crate) env: &'a Env,
    pub(crate) ctx: &'a Context,
    pub(crate) isolate: &'a Shared,
}

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

/// The request the legs send, and what the completion still needs of the
/// steps before the race.
fn outbound(
    client: Client<'_>,
    exchange: &Exchange,
    fault: ClientBodyFault,
    mut miss: Miss,
) -> worker::Result<(OutboundRequest, Miss)> {
    let outbound = OutboundRequest {
        method: exchange.method.clone(),
        headers: leg::outbound_headers(client.headers, exchange)?,
        body: std::mem::replace(&mut miss.body, OutboundBody::Empty),
        client_body: fault,
    };
    // A stale entry is revalidated with the validators the isolate gave
    // (none for a conditional request): a 304 then refreshes it.
    cache::set_fields(&outbound.headers, &miss.validators)?;
    Ok((outbound, miss))
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
        refresh::spawn(io, *refresh, &entry);
    }
    let timing = Timing {
        start_ms: exchange.started_ms,
        now_ms: now_ms(),
    };
    let how = serve.how;
    cache::rebuilt(&entry, &serve.edits, serve.not_modified)
        .and_then(|served| reply::cache_hit_response(served, how, &exchange.request_id, timing))
}

/// After the race: the isolate's completion and its effects on the cache
/// ([`complete`]), then the response, the log line, the PoP push.
async fn finish(
    io: Io<'_>,
    exchange: &Exchange,
    mut report: RaceReport,
    mut miss: Miss,
) -> worker::Result<web_sys::Response> {
    let dataset = analytics::dataset(io.env);
    let (done, stored) = complete(io, exchange, &mut report, &mut miss, dataset.is_some()).await;
    if let Some(store) = stored? {
        io.ctx.wait_until(store);
    }
    let timing = Timing {
        start_ms: exchange.started_ms,
        now_ms: now_ms(),
    };
    let response = match (&done.rescue, &miss.stale) {
        (Some(edits), Some(Stale { entry, .. })) => {
            // The failed answer's body is not read: its fetch is cut.
            if let Some(controller) = report.winner_controller.take() {
                controller.abort();
            }
            cache::rebuilt(entry, edits, false).and_then(|served| {
                let how = Served::StaleIfError;
                reply::cache_hit_response(served, how, &exchange.request_id, timing)
            })
        }
        _ => reply::race_response(io.isolate, report, &exchange.request_id, &done, timing),
    };
    if response.is_ok() {
        request_log::write(done.record, dataset.as_ref());
    }
    if let Some(body) = done.push {
        let client = io.client;
        pop::link::push(
            io.ctx,
            io.env,
            client.req,
            io.isolate,
            client.connections,
            body,
        );
    }
    response
}

/// The isolate's completion of `exchange`'s race and its effects on the
/// cache: a `304` merged into the entry the legs asked about (read again
/// for a refresh: its client's copy used the first), the URLs a write
/// invalidates, the store (its copy taken now; its put the task returned).
/// `analytics` when a dataset is bound. The completion, and `Err` when a
/// merged entry could not be rebuilt (nothing is stored then).
async fn complete(
    io: Io<'_>,
    exchange: &Exchange,
    report: &mut RaceReport,
    miss: &mut Miss,
    analytics: bool,
) -> (Completion, worker::Result<Option<StoreTask>>) {
    let Io {
        client, isolate, ..
    } = io;
    let not_modified = matches!(&report.outcome, Outcome::Won(r) if r.status() == 304);
    if exchange.refresh && not_modified && !miss.validators.is_empty() {
        // Gone from the cache meanwhile (a write, an eviction): the bare
        // 304 is still counted and logged, and stores nothing.
        let found = cache::lookup(client.url, client.head, client.connections).await;
        miss.stale = (found.entry).map(|entry| Stale {
            entry,
            if_error: false,
        });
    }
    // A stale entry that may stand in for a failure.
    let stale_if_error = match &miss.stale {
        Some(stale) if stale.if_error => Some((stale.entry.stored.status(), &stale.entry.head)),
        _ => None,
    };
    // The entry the legs asked about with its validators.
    let revalidated = (miss.stale.as_ref())
        .filter(|_| !miss.validators.is_empty())
        .map(|stale| (stale.entry.stored.status(), &stale.entry.head));
    let asked = Asked {
        url: client.url,
        head: client.head,
        generation: miss.generation.as_deref(),
        stale_if_error,
        revalidated,
    };
    let mut done = report.complete(isolate, exchange, asked, analytics);
    // A 304 to them: the client gets the entry it updated, and the cache
    // keeps that.
    if let Some(stale) = &miss.stale {
        if let Err(e) = report.take_merged(&done, &stale.entry, isolate) {
            return (done, Err(e));
        }
    }
    cache::delete_all(&done.invalidate, client.connections).await;
    let mut store = None;
    if let (Some(plan), Some(response)) = (done.store.take(), report.kept_response()) {
        let target = cache::StoreTarget {
            url: client.url,
            isolate,
            plan,
            leader: miss.leader.take(),
        };
        store = cache::store_task(target, response, client.connections);
    }
    // Not stored: waiters are released now, as the headers say so, not later.
    drop(miss.leader.take());
    (done, Ok(store))
}

/// A store's put, run in the background.
type StoreTask = futures::future::LocalBoxFuture<'static, ()>;

/// Runs a background refresh the isolate accepted (`refresh`, asking with
/// the served entry's `validators`) through the same race and completion
/// as a client's request; nobody reads its answer but the cache.
pub(crate) async fn refresh(io: Io<'_>, refresh: Refresh, validators: Vec<(&'static str, String)>) {
    let Refresh { exchange, plan } = refresh;
    let miss = Miss::new(None, validators);
    let (mut outbound, mut miss) = match outbound(io.client, &exchange, Default::default(), miss) {
        Ok(built) => built,
        Err(e) => {
            console_warn!("hedgehog-edge: could not build a refresh: {e}");
            return;
        }
    };
    // Nobody waits on this request: nothing aborts it but the timeout.
    let Ok(never) = web_sys::AbortController::new() else {
        return;
    };
    let connections = io.client.connections;
    let signal = never.signal();
    let raced = race::run(
        io.isolate,
        plan,
        &exchange,
        &mut outbound,
        &signal,
        connections,
    );
    let Ok(mut report) = raced.await else {
        return;
    };
    let dataset = analytics::dataset(io.env);
    let (done, stored) = complete(io, &exchange, &mut report, &mut miss, dataset.is_some()).await;
    request_log::write(done.record, dataset.as_ref());
    // The stored copy is a tee of the answer; this branch is not read.
    if let Some(body) = report.kept_response().and_then(web_sys::Response::body) {
        let _ = body.cancel();
    }
    // Put before the refresh ends: its claim on the key holds until the
    // entry is replaced (a stale hit meanwhile starts no second one).
    match stored {
        Ok(Some(store)) => store.await,
        Ok(None) => {}
        Err(e) => console_warn!("hedgehog-edge: could not rebuild a refreshed entry: {e:?}"),
    }
}
