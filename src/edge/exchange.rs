//! What a client's request and a background refresh share, between the
//! isolate's steps before the race and the response: what those steps
//! leave (the body the legs send, a stale entry and its validators), the
//! request the legs send, and the one driver of the steps after the race
//! (a `304`'s merge, invalidations, the store, the push, the response,
//! the log line), in the core's order.

use futures::future::LocalBoxFuture;
use worker::{web_sys, Context, Env};

use super::cache::{self, Entry};
use super::client::Client;
use super::clock::now_ms;
use super::coalesce::LeaderGuard;
use super::isolate::Shared;
use super::leg::{self, OutboundBody, OutboundRequest};
use super::race::{Asked, Outcome, RaceReport};
use super::reply::{self, Timing};
use super::request_body::ClientBodyFault;
use super::{analytics, pop, request_log};
use hedgehog_core::edge::{AfterRace, Completion, Exchange, Served};

/// What the steps before the race left for it: the body the legs send, a
/// stale entry, the fields the legs revalidate it with, the variants'
/// generation, the flight to lead.
pub(crate) struct Miss {
    pub(crate) body: OutboundBody,
    pub(crate) stale: Option<Stale>,
    pub(crate) validators: Vec<(&'static str, String)>,
    pub(crate) generation: Option<String>,
    pub(crate) leader: Option<LeaderGuard>,
}

impl Miss {
    /// Nothing found yet: no body, no entry; the flight `leader` leads, the
    /// fields the legs revalidate with.
    pub(crate) fn new(
        leader: Option<LeaderGuard>,
        validators: Vec<(&'static str, String)>,
    ) -> Self {
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
pub(crate) struct Stale {
    pub(crate) entry: Entry,
    pub(crate) if_error: bool,
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

/// The request the legs send, and what the completion still needs of the
/// steps before the race.
pub(crate) fn outbound(
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

/// After the race: the isolate's completion of `exchange`'s race, then
/// its steps in the order the core gives ([`Completion::after_race`]),
/// for a client's request and a refresh alike: a `304` merged into the
/// entry the legs asked about (read again for a refresh: its client's
/// copy used the first), the URLs a write invalidates, the store, the
/// push, the response, the log line; a refresh's store awaited. The
/// client's response (`None` for a refresh); `Err` when a merged entry or
/// the response could not be built (nothing is stored, logged or
/// answered after that).
pub(crate) async fn after_race(
    io: Io<'_>,
    exchange: &Exchange,
    report: RaceReport,
    mut miss: Miss,
) -> worker::Result<Option<web_sys::Response>> {
    let Io {
        client, isolate, ..
    } = io;
    let not_modified = matches!(&report.outcome, Outcome::Won(r) if r.status() == 304);
    if exchange.refresh && not_modified && !miss.validators.is_empty() {
        miss.stale = read_again(client).await;
    }
    let dataset = analytics::dataset(io.env);
    let mut done = completion(isolate, exchange, &report, &miss, client, dataset.is_some());
    let mut report = Some(report);
    let mut store = None;
    let mut response = None;
    for step in std::mem::take(&mut done.after_race) {
        match step {
            AfterRace::Merge => {
                if let (Some(stale), Some(report)) = (&miss.stale, report.as_mut()) {
                    take_merged(report, &done, &stale.entry, isolate)?;
                }
            }
            AfterRace::Invalidate => cache::delete_all(&done.invalidate, client.connections).await,
            AfterRace::Store => {
                let kept = report.as_ref().and_then(RaceReport::kept_response);
                store = take_store(io, &mut done, kept, &mut miss);
            }
            AfterRace::Push => {
                if let Some(body) = done.push.take() {
                    pop::link::push(
                        io.ctx,
                        io.env,
                        client.req,
                        isolate,
                        client.connections,
                        body,
                    );
                }
            }
            AfterRace::Respond => {
                if let Some(report) = report.take() {
                    response = Some(respond(isolate, exchange, report, &miss, &done)?);
                }
            }
            AfterRace::Log => {
                request_log::write(std::mem::take(&mut done.record), dataset.as_ref())
            }
            AfterRace::Discard => {
                let kept = report.as_ref().and_then(RaceReport::kept_response);
                if let Some(body) = kept.and_then(web_sys::Response::body) {
                    let _ = body.cancel();
                }
            }
            AfterRace::AwaitStore => {
                if let Some(store) = store.take() {
                    store.await;
                }
            }
        }
    }
    if let Some(store) = store {
        io.ctx.wait_until(store);
    }
    Ok(response)
}

/// A refresh answered `304`: the entry it refreshes, read again (its
/// client's copy used the first). Gone from the cache meanwhile (a write,
/// an eviction): none, and the bare `304` is still counted and logged and
/// stores nothing.
async fn read_again(client: Client<'_>) -> Option<Stale> {
    let found = cache::lookup(client.url, client.head, client.connections).await;
    (found.entry).map(|entry| Stale {
        entry,
        if_error: false,
    })
}

/// The store's copy of the kept answer `kept`, when the completion stores
/// it, and its put; the flight's waiters are released either way (not
/// stored: now, as the headers say so, not later).
fn take_store(
    io: Io<'_>,
    done: &mut Completion,
    kept: Option<&web_sys::Response>,
    miss: &mut Miss,
) -> Option<LocalBoxFuture<'static, ()>> {
    let mut store = None;
    if let (Some(plan), Some(kept)) = (done.store.take(), kept) {
        let target = cache::StoreTarget {
            url: io.client.url,
            isolate: io.isolate,
            plan,
            leader: miss.leader.take(),
        };
        store = cache::store_task(target, kept, io.client.connections);
    }
    drop(miss.leader.take());
    store
}

/// The isolate's completion of `exchange`'s race (`report`), with what it
/// reads of the request and of the steps before the race (`miss`).
fn completion(
    isolate: &Shared,
    exchange: &Exchange,
    report: &RaceReport,
    miss: &Miss,
    client: Client<'_>,
    analytics: bool,
) -> Completion {
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
    report.complete(isolate, exchange, asked, analytics)
}

/// The client's response: the stale entry standing in for a failure
/// (`done.rescue`), or the race's answer.
fn respond(
    isolate: &Shared,
    exchange: &Exchange,
    mut report: RaceReport,
    miss: &Miss,
    done: &Completion,
) -> worker::Result<web_sys::Response> {
    let timing = Timing {
        start_ms: exchange.started_ms,
        now_ms: now_ms(),
    };
    match (&done.rescue, &miss.stale) {
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
        _ => reply::race_response(isolate, report, &exchange.request_id, done, timing),
    }
}

/// The completion `done` merged a `304` into `entry`: the kept response
/// becomes the entry it updated (what the client gets and the cache
/// keeps). `Err` when it cannot be rebuilt; the store's claim is then
/// given back (never the bare `304` stored).
fn take_merged(
    report: &mut RaceReport,
    done: &Completion,
    entry: &Entry,
    isolate: &Shared,
) -> worker::Result<()> {
    let (Some(edits), Outcome::Won(response)) = (&done.merged, &mut report.outcome) else {
        return Ok(());
    };
    match cache::rebuilt(entry, edits, false) {
        Ok(updated) => *response = updated,
        Err(e) => {
            if let Some((_, ticket)) = &done.store {
                cache::copy_refused(isolate, ticket);
            }
            return Err(e);
        }
    }
    Ok(())
}
