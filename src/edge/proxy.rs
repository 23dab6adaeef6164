//! The proxy pipeline: body, cache (or a coalesced flight), plan, race,
//! completion, response. Every decision is the [`Isolate`]'s; each step
//! here converts types and does the I/O.
//!
//! [`Isolate`]: hedgehog_core::isolate::Isolate

use std::time::Duration;

use worker::{console_error, web_sys, Context, Delay, Env};

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
use hedgehog_core::edge::{BeforeRace, BodyPlan, EntryUse, Exchange, Role, Served};

/// How much of a refused GET/HEAD body is read (and dropped) before the 400.
const REFUSED_BODY_DRAIN_BYTES: usize = 64 * 1024;

/// The 400's message for a body that broke off on the client's side.
const BODY_BROKE: &str =
    "the request body broke off before its end (fewer bytes than Content-Length, or a bad chunk)";

/// What the cache left for the race: a stale entry (whether it may stand
/// in for a failure, the fields that revalidate it), the variants'
/// generation, the flight to lead.
#[derive(Debug, Default)]
struct Miss {
    stale: Option<Stale>,
    generation: Option<String>,
    leader: Option<LeaderGuard>,
}

/// A stored entry too stale to serve.
#[derive(Debug)]
struct Stale {
    entry: Entry,
    if_error: bool,
    validators: Vec<(&'static str, String)>,
}

/// Proxies an exchange the isolate accepted.
pub(crate) async fn run(
    client: Client<'_>,
    env: &Env,
    ctx: &Context,
    isolate: &Shared,
    mut exchange: Exchange,
) -> worker::Result<web_sys::Response> {
    let request_id = exchange.request_id.clone();
    // Taken at once: a refused request releases its flight as it returns.
    let leader = match exchange.role {
        Role::Leader(id) => Some(LeaderGuard::new(isolate, client.url, id)),
        _ => None,
    };
    let mut held = HeldClaim::new(isolate);
    let fault = ClientBodyFault::default();
    let body = match read_body(client, &mut exchange, &mut held, &fault).await {
        Ok(body) => body,
        Err(_) if client.req.signal().aborted() => {
            return Failure::ClientGone.response(&request_id)
        }
        Err(message) => return Failure::BadRequest(message).response(&request_id),
    };
    // The cache step and the completion are boxed: inline, their state
    // (1.2 KB for the completion) would be held through the whole race.
    let miss = match Box::pin(consult_cache(client, env, ctx, isolate, &exchange, leader)).await? {
        Ok(miss) => miss,
        Err(served) => return served,
    };
    if client.req.signal().aborted() {
        return Failure::ClientGone.response(&request_id);
    }
    // Planned at intake when nothing had to be looked up or read first.
    let plan = match exchange.plan.take() {
        Some(plan) => plan,
        None => isolate.borrow_mut().plan(&exchange),
    };
    let mut outbound = outbound(client, &exchange, body, fault, &miss)?;
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
    Box::pin(finish(client, env, ctx, isolate, &exchange, report, miss)).await
}

/// The request the legs send.
fn outbound(
    client: Client<'_>,
    exchange: &Exchange,
    body: OutboundBody,
    fault: ClientBodyFault,
    miss: &Miss,
) -> worker::Result<OutboundRequest> {
    let outbound = OutboundRequest {
        method: exchange.method.clone(),
        headers: leg::outbound_headers(client.headers, exchange)?,
        body,
        client_body: fault,
    };
    // A stale entry is revalidated with the validators the isolate gave
    // (none for a conditional request): a 304 then refreshes it.
    let validators = miss.stale.as_ref().map_or(&[][..], |s| &s.validators[..]);
    cache::set_fields(&outbound.headers, validators)?;
    Ok(outbound)
}

/// The body the legs send; `Err` with the 400's message for a GET or HEAD
/// whose body held bytes, or a held body that broke off.
async fn read_body(
    client: Client<'_>,
    exchange: &mut Exchange,
    held: &mut HeldClaim,
    fault: &ClientBodyFault,
) -> Result<OutboundBody, &'static str> {
    let declared = exchange.declared_length;
    Ok(match exchange.body {
        BodyPlan::Empty => OutboundBody::Empty,
        // GET and HEAD carry no body: an empty one is dropped, a real one refused.
        BodyPlan::Drain { refuse } => {
            let had_bytes = request_body::drain_up_to(client.req, REFUSED_BODY_DRAIN_BYTES).await;
            if had_bytes || refuse {
                return Err("a GET or HEAD request must not carry a body");
            }
            OutboundBody::Empty
        }
        // Held for the hedge; one that outgrows a cap goes once, streamed.
        // Read before an origin is chosen: a client that hangs up
        // mid-upload has then claimed nothing from any origin.
        BodyPlan::Hold { cap } => {
            match request_body::read_up_to(client.req, cap, declared, held, fault).await {
                BodyRead::Held(bytes) => OutboundBody::Buffered(bytes),
                BodyRead::Streamed(stream, reason) => {
                    exchange.not_hedgeable(reason);
                    OutboundBody::Stream(Some(stream))
                }
                BodyRead::Broken => return Err(BODY_BROKE),
            }
        }
        BodyPlan::Stream => OutboundBody::Stream(
            (client.req.body())
                .map(|raw| request_body::forward(&raw, declared, fault).unwrap_or(raw)),
        ),
    })
}

/// Waits on a coalesced flight and looks in the cache as the isolate says
/// ([`BeforeRace`]): `Err(response)` when the client left while it waited,
/// else what was found (nothing: race) and whether after a flight that
/// stored it (`coalesced`).
///
/// Waiters poll on their own timers instead of being woken by the leader:
/// a wake-up from the leader would run the waiter's code inside the
/// leader's request, which the runtime does not allow to do I/O for another
/// request.
async fn find_entry(
    client: Client<'_>,
    isolate: &Shared,
    exchange: &Exchange,
) -> Result<(cache::Lookup, bool), worker::Result<web_sys::Response>> {
    let mut next = exchange.before_race;
    for polls in 1u32.. {
        match next {
            BeforeRace::Wait { ms } => {
                Delay::from(Duration::from_millis(ms as u64)).await;
                if client.req.signal().aborted() {
                    return Err(Failure::ClientGone.response(&exchange.request_id));
                }
                next = (isolate.borrow()).flight_polled(exchange, client.url, polls, now_ms());
            }
            BeforeRace::LookUp { coalesced } => {
                let found = cache::lookup(client.url, client.head, client.connections).await;
                return Ok((found, coalesced));
            }
            BeforeRace::Race => break,
        }
    }
    Ok((cache::Lookup::default(), false))
}

/// Finds what the cache holds for the request ([`find_entry`]) and does
/// what the isolate says of it: `Err(response)` when the cache answers (or
/// the client left), else what the race needs of it.
async fn consult_cache(
    client: Client<'_>,
    env: &Env,
    ctx: &Context,
    isolate: &Shared,
    exchange: &Exchange,
    mut leader: Option<LeaderGuard>,
) -> worker::Result<Result<Miss, worker::Result<web_sys::Response>>> {
    let (mut found, coalesced) = match find_entry(client, isolate, exchange).await {
        Ok(found) => found,
        Err(gone) => return Ok(Err(gone)),
    };
    let Some(entry) = found.entry.take() else {
        return Ok(Ok(Miss {
            generation: found.generation,
            leader,
            ..Miss::default()
        }));
    };
    let judged = (isolate.borrow_mut()).judge_entry(
        exchange,
        &entry.head,
        client.head,
        client.url,
        coalesced,
    );
    let (how, not_modified, edits, refresh) = match judged {
        Some(EntryUse::Serve {
            how,
            not_modified,
            edits,
            refresh,
            ..
        }) => (how, not_modified, edits, refresh),
        Some(EntryUse::Stale {
            if_error,
            validators,
        }) => {
            return Ok(Ok(Miss {
                stale: Some(Stale {
                    entry,
                    if_error,
                    validators,
                }),
                generation: found.generation,
                leader,
            }));
        }
        None => {
            return Ok(Ok(Miss {
                generation: found.generation,
                leader,
                ..Miss::default()
            }))
        }
    };
    // The isolate has the flight stored (fresh, or stale while it is
    // refreshed): its waiters read the entry at once.
    if let Some(leader) = leader.take() {
        leader.disarm();
    }
    if let Some(refresh) = refresh {
        refresh::spawn(ctx, env, isolate, client, *refresh, &entry);
    }
    let timing = Timing {
        start_ms: exchange.started_ms,
        now_ms: now_ms(),
    };
    let served = cache::rebuilt(&entry, &edits, not_modified)
        .and_then(|served| reply::cache_hit_response(served, how, &exchange.request_id, timing));
    Ok(Err(served))
}

/// After the race: the isolate's completion, then its I/O (invalidation,
/// the store, the response, the log line, the PoP push).
async fn finish(
    client: Client<'_>,
    env: &Env,
    ctx: &Context,
    isolate: &Shared,
    exchange: &Exchange,
    mut report: RaceReport,
    mut miss: Miss,
) -> worker::Result<web_sys::Response> {
    let dataset = analytics::dataset(env);
    // A stale entry that may stand in for a failure.
    let stale_if_error = match &miss.stale {
        Some(stale) if stale.if_error => Some((stale.entry.stored.status(), &stale.entry.head)),
        _ => None,
    };
    // The entry the legs asked about with its validators.
    let revalidated = (miss.stale.as_ref())
        .filter(|stale| !stale.validators.is_empty())
        .map(|stale| (stale.entry.stored.status(), &stale.entry.head));
    let asked = Asked {
        url: client.url,
        head: client.head,
        generation: miss.generation.as_deref(),
        stale_if_error,
        revalidated,
    };
    let mut done = report.complete(isolate, exchange, asked, dataset.is_some());
    // A 304 to them: the client gets the entry it updated, and the cache
    // keeps that.
    if let Some(stale) = &miss.stale {
        report.take_merged(&done, &stale.entry, isolate)?;
    }
    let kept = report.kept_response();
    cache::delete_all(&done.invalidate, client.connections).await;
    if let (Some(plan), Some(response)) = (done.store.take(), kept) {
        let target = cache::StoreTarget {
            url: client.url,
            isolate,
            plan,
            leader: miss.leader.take(),
        };
        cache::store(ctx, target, response, client.connections);
    }
    // Not stored: waiters are released now, as the headers say so, not later.
    drop(miss.leader.take());
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
        _ => reply::race_response(isolate, report, &exchange.request_id, &done, timing),
    };
    if response.is_ok() {
        request_log::write(done.record, dataset.as_ref());
    }
    if let Some(body) = done.push {
        pop::link::push(ctx, env, client.req, isolate, client.connections, body);
    }
    response
}
