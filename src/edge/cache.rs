//! The Workers Cache API (`caches.default`) as a shared cache whose rules
//! are the core's ([`hedgehog_core::cache`]): this file only reads, writes and
//! deletes entries and rebuilds responses from them, with the key and the
//! field edits the core's entry form gives (`hedgehog_core::cache::entry`:
//! what a stored entry keeps and hides, how a lookup finds a request's
//! variant, what serving it and a `304` change).
//!
//! A cache failure never fails the request: a lookup error is a miss, a
//! store error is logged.

use worker::js_sys::{self, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{console_warn, web_sys};

use std::cell::RefCell;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use futures::stream::{self, StreamExt};
use worker::js_sys::Uint8Array;

use super::coalesce::LeaderGuard;
use super::connections::Connections;
use super::head::{self, null_body_status};
use super::isolate::{self, Shared};
use super::request_body::HeldClaim;
use hedgehog_core::edge::{
    lookup_step, CopyEnd, EntryHead, HeaderEdits, HeaderList, LookupStep, StorePlan, StoreTicket,
};

fn default_cache() -> Option<web_sys::Cache> {
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let storage = global.caches().ok()?;
    Reflect::get(&storage, &JsValue::from_str("default"))
        .ok()?
        .dyn_into::<web_sys::Cache>()
        .ok()
}

async fn match_key(
    cache: &web_sys::Cache,
    key: &str,
    connections: &Rc<Connections>,
) -> Option<web_sys::Response> {
    let _slot = connections.take().await;
    match JsFuture::from(cache.match_with_str(key)).await {
        Ok(value) => value.dyn_into::<web_sys::Response>().ok(),
        Err(e) => {
            console_warn!("hedgehog-edge: cache lookup failed: {e:?}");
            None
        }
    }
}

/// A stored entry found for a request.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The entry as stored (internal headers and all).
    pub(crate) stored: web_sys::Response,
    /// Its fields, freshness and the origin fields it keeps aside.
    pub(crate) head: EntryHead,
}

/// Sets each of `fields` on `headers` (one call into JavaScript each).
pub(crate) fn set_fields<N: AsRef<str>>(
    headers: &web_sys::Headers,
    fields: &[(N, String)],
) -> worker::Result<()> {
    for (name, value) in fields {
        headers.set(name.as_ref(), value)?;
    }
    Ok(())
}

/// Carries out the core's edits on `headers`.
fn apply(headers: &web_sys::Headers, edits: &HeaderEdits) -> worker::Result<()> {
    for name in &edits.delete {
        headers.delete(name)?;
    }
    set_fields(headers, &edits.set)
}

/// What a lookup found.
#[derive(Debug, Default)]
pub(crate) struct Lookup {
    /// The entry this request's headers select, if any.
    pub(crate) entry: Option<Entry>,
    /// The generation of the URL's variants, when a marker names one: a
    /// store for this request reuses it.
    pub(crate) generation: Option<String>,
}

/// The stored entry for `url` that may answer a request with these headers,
/// if there is one (fresh or not: the caller asks the core what it may do).
pub(crate) async fn lookup(
    url: &str,
    request_headers: &HeaderList,
    connections: &Rc<Connections>,
) -> Lookup {
    let Some(cache) = default_cache() else {
        return Lookup::default();
    };
    let Some(plain) = match_key(&cache, url, connections).await else {
        return Lookup::default();
    };
    let plain_head = head::read(&plain.headers());
    let (step, generation) = lookup_step(url, &plain_head, request_headers);
    if step != LookupStep::Plain {
        // A marker (or an entry no request may have) is all the plain key
        // gives: its body is let go now.
        if let Some(body) = plain.body() {
            let _ = body.cancel();
        }
    }
    let found = match step {
        LookupStep::Plain => Some((plain, plain_head)),
        LookupStep::Variant(key) => match_key(&cache, &key, connections).await.map(|variant| {
            let fields = head::read(&variant.headers());
            (variant, fields)
        }),
        LookupStep::Miss => None,
    };
    let entry = found.and_then(|(stored, fields)| {
        Some(Entry {
            stored,
            head: EntryHead::new(fields)?,
        })
    });
    Lookup { entry, generation }
}

/// Deletes the entry under `url` (the response itself, or the marker of its
/// variants, which leaves every variant unreachable).
pub(crate) async fn delete(url: &str, connections: &Rc<Connections>) {
    if let Some(cache) = default_cache() {
        let _slot = connections.take().await;
        if let Err(e) = JsFuture::from(cache.delete_with_str(url)).await {
            console_warn!("hedgehog-edge: cache delete failed: {e:?}");
        }
    }
}

/// Deletes the stored entries of `urls` (a successful write's targets, the
/// core's [`Completion::invalidate`]) together, before the client hears back.
///
/// [`Completion::invalidate`]: hedgehog_core::isolate::Completion
pub(crate) async fn delete_all(urls: &[String], connections: &Rc<Connections>) {
    futures::future::join_all(urls.iter().map(|url| delete(url, connections))).await;
}

/// A new response from the stored entry with `edits` on its fields (a
/// bodiless `304` when `not_modified`).
pub(crate) fn rebuilt(
    entry: &Entry,
    edits: &HeaderEdits,
    not_modified: bool,
) -> worker::Result<web_sys::Response> {
    let stored = &entry.stored;
    let init = web_sys::ResponseInit::new();
    // Copied natively into the new response, whose headers are then ours.
    init.set_headers_headers(&stored.headers());
    let out = if not_modified {
        init.set_status(304);
        web_sys::Response::new_with_opt_str_and_init(None, &init)?
    } else {
        init.set_status(stored.status());
        init.set_status_text(&stored.status_text());
        let body = stored.body().filter(|_| !null_body_status(stored.status()));
        web_sys::Response::new_with_opt_readable_stream_and_init(body.as_ref(), &init)?
    };
    apply(&out.headers(), edits)?;
    Ok(out)
}

/// Where a store goes and what it carries besides the response.
#[derive(Debug)]
pub(crate) struct StoreTarget<'a> {
    /// The request URL (the plain key, where a varying response's marker goes).
    pub(crate) url: &'a str,
    /// The isolate that hears how the store went.
    pub(crate) isolate: &'a Shared,
    /// Its key and fields as stored, as the core decided them, and the
    /// ticket the core gets back.
    pub(crate) plan: (StorePlan, StoreTicket),
    /// The flight this request leads, if any: released once the store is
    /// done (its waiters then read the entry, or fetch for themselves).
    pub(crate) leader: Option<LeaderGuard>,
}

/// The copy a completion's store plan asked for could not be made: the
/// isolate gives back what its ticket claimed.
pub(crate) fn copy_refused(isolate: &Shared, ticket: &StoreTicket) {
    let refused = CopyEnd {
        refused: true,
        ..CopyEnd::default()
    };
    isolate::try_with(isolate, |i| i.copy_stored(ticket, refused, false));
}

/// Stores a copy of `response` (the origin's, or one rebuilt from a `304`):
/// the copy is taken now, teeing the body (the client's stream is not held
/// back by the cache; call it before the body is handed on), and put by
/// the future returned, for the caller to run in the background; `None`
/// when the copy cannot be made (the isolate has heard).
pub(crate) fn store_task(
    target: StoreTarget<'_>,
    response: &web_sys::Response,
    connections: &Rc<Connections>,
) -> Option<LocalBoxFuture<'static, ()>> {
    let (plan, ticket) = target.plan;
    let shared = Shared::clone(target.isolate);
    let StorePlan {
        key,
        edits,
        marker,
        expected_len,
    } = plan;
    let made = default_cache().and_then(|cache| {
        let marker = match marker {
            Some(fields) => Some(marker_response(&fields).ok()?),
            None => None,
        };
        // A body of unknown length claims from the held-body cap chunk by
        // chunk (a declared one was claimed by the completion).
        let claim = HeldClaim::new(target.isolate);
        let (copy, progress) =
            tracked_copy(response, &edits, claim, expected_len.is_none()).ok()?;
        Some((cache, marker, copy, progress))
    });
    let Some((cache, marker, copy, progress)) = made else {
        copy_refused(&shared, &ticket);
        return None;
    };
    let url = target.url.to_string();
    let leader = target.leader;
    let connections = Rc::clone(connections);
    Some(Box::pin(async move {
        // The copy (a tee) holds what the cache has not yet read, within
        // the held-body cap, while the put waits for a free slot.
        let slot = connections.take().await;
        let stored = JsFuture::from(cache.put_with_str(&key, &copy)).await;
        drop(slot);
        let end = progress.borrow().end(stored.is_ok());
        let varying = marker.is_some();
        let keep = isolate::try_with(&shared, |i| i.copy_stored(&ticket, end, varying));
        if keep != Some(true) {
            // Short: taken out again before anyone is served it (a copy cut
            // at the cap can be kept short even though its put failed).
            let _slot = connections.take().await;
            let _ = JsFuture::from(cache.delete_with_str(&key)).await;
            if !end.over_cap {
                console_warn!("hedgehog-edge: the origin's body ended early; not cached");
            }
            return;
        }
        // The variant first, the marker after it: a marker always points at
        // a variant that was stored (or is being replaced).
        let mut stored = stored;
        if let (Ok(_), Some(marker)) = (&stored, marker) {
            let _slot = connections.take().await;
            stored = JsFuture::from(cache.put_with_str(&url, &marker)).await;
            if stored.is_ok() {
                isolate::try_with(&shared, |i| i.marker_stored(&ticket));
            }
        }
        match stored {
            // The isolate has the flight stored: its waiters read the entry.
            Ok(_) => leader.into_iter().for_each(LeaderGuard::disarm),
            Err(e) => console_warn!("hedgehog-edge: cache store failed: {e:?}"),
        }
    }))
}

/// How the cache's copy of a body went, as far as the copy has been read,
/// and the bytes it holds against the isolate's cap (given back when the
/// copy and its store are both done).
#[derive(Debug)]
struct CopyProgress {
    bytes: u64,
    errored: bool,
    ended: bool,
    /// A chunk did not fit under the cap: the copy was cut there.
    over_cap: bool,
    claim: HeldClaim,
}

impl CopyProgress {
    /// How the copy went, for the isolate; `put` when the cache took it.
    fn end(&self, put: bool) -> CopyEnd {
        CopyEnd {
            put,
            bytes: self.bytes,
            errored: self.errored,
            ended: self.ended,
            over_cap: self.over_cap,
            refused: false,
        }
    }
}

/// A copy of `response` (a tee of its body) for the cache, and its progress.
/// The copy passes through the Worker chunk by chunk so the store can tell a
/// whole body from one that ended early: an origin that resets mid-body is
/// relayed by the runtime as an ordinary end, and the cache would keep the
/// short body as if it were the response.
/// `claim_chunks`: the body's length is unknown, so each chunk is claimed
/// as it passes (`claim` holds what was claimed up front).
fn tracked_copy(
    response: &web_sys::Response,
    edits: &HeaderEdits,
    claim: HeldClaim,
    claim_chunks: bool,
) -> worker::Result<(web_sys::Response, Rc<RefCell<CopyProgress>>)> {
    let copy = response.clone()?;
    let progress = Rc::new(RefCell::new(CopyProgress {
        bytes: 0,
        errored: false,
        ended: false,
        over_cap: false,
        claim,
    }));
    let init = web_sys::ResponseInit::new();
    init.set_status(copy.status());
    // The stored fields: the response's, with the core's edits.
    let stored = web_sys::Headers::new_with_headers(&response.headers())?;
    apply(&stored, edits)?;
    init.set_headers_headers(&stored);
    let Some(body) = copy.body().filter(|_| !null_body_status(copy.status())) else {
        progress.borrow_mut().ended = true;
        let copy = web_sys::Response::new_with_opt_str_and_init(None, &init)?;
        return Ok((copy, progress));
    };
    let source = wasm_streams::ReadableStream::from_raw(body)
        .try_into_stream()
        .map_err(|(e, _)| worker::Error::JsError(format!("origin body is locked: {e:?}")))?;
    let (counting, ending) = (Rc::clone(&progress), Rc::clone(&progress));
    let tracked = source
        .map(move |item| {
            let mut p = counting.borrow_mut();
            match &item {
                Ok(chunk) => {
                    let len = u64::from(Uint8Array::new(chunk).length());
                    if claim_chunks && !p.claim.try_add(len) {
                        // Erroring the copy cancels its branch of the tee,
                        // so nothing more is held for it.
                        p.over_cap = true;
                        p.errored = true;
                        return Some(Err(JsValue::from_str("over the held-body cap")));
                    }
                    p.bytes += len;
                }
                Err(_) => p.errored = true,
            }
            Some(item)
        })
        .chain(stream::once(async move {
            ending.borrow_mut().ended = true;
            None
        }))
        .filter_map(|item| async move { item });
    let body = wasm_streams::ReadableStream::from_stream(tracked).into_raw();
    let copy = web_sys::Response::new_with_opt_readable_stream_and_init(Some(&body), &init)?;
    Ok((copy, progress))
}

/// The entry under the plain URL of a varying response: no body, the
/// fields the core gave it (the names it varies on, its generation, as
/// long a keep time as its variant).
fn marker_response(fields: &[(String, String)]) -> worker::Result<web_sys::Response> {
    let headers = web_sys::Headers::new()?;
    set_fields(&headers, fields)?;
    let init = web_sys::ResponseInit::new();
    init.set_status(200);
    init.set_headers_headers(&headers);
    Ok(web_sys::Response::new_with_opt_str_and_init(None, &init)?)
}
