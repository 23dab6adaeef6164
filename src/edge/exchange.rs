//! What a client's request and a background refresh share, between the
//! isolate's steps before the race and the response: what those steps
//! leave (the body the legs send, a stale entry and its validators), the
//! request the legs send, and the isolate's completion with its effects on
//! the cache (a `304`'s merge, invalidations, the store).

use worker::{Context, Env};

use super::cache::{self, Entry};
use super::client::Client;
use super::coalesce::LeaderGuard;
use super::isolate::Shared;
use super::leg::{self, OutboundBody, OutboundRequest};
use super::race::{Asked, Outcome, RaceReport};
use super::request_body::ClientBodyFault;
use hedgehog_core::edge::{Completion, Exchange};

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

/// The isolate's completion of `exchange`'s race and its effects on the
/// cache: a `304` merged into the entry the legs asked about (read again
/// for a refresh: its client's copy used the first), the URLs a write
/// invalidates, the store (its copy taken now; its put the task returned).
/// `analytics` when a dataset is bound. The completion, and `Err` when a
/// merged entry could not be rebuilt (nothing is stored then).
pub(crate) async fn complete(
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
        if let Err(e) = take_merged(report, &done, &stale.entry, isolate) {
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

/// A store's put, run in the background.
pub(crate) type StoreTask = futures::future::LocalBoxFuture<'static, ()>;
