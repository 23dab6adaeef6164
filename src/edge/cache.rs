//! The Workers Cache API (`caches.default`) as a shared cache whose rules
//! are the core's ([`hedgehog_core::cache`]): this file only reads, writes and
//! deletes entries and rebuilds responses from them.
//!
//! A stored entry is the origin's response less hop-by-hop headers (and
//! those its `Connection` names), with its freshness ([`StoredMeta`]) and the
//! origin's headers the runtime would read for freshness of its own
//! (`Cache-Control`, `Expires`, ...) moved into one internal header
//! ([`EntryMeta`]); the runtime is told only how long to keep it. Serving an entry restores the
//! origin's headers, drops every internal one and sends a fresh `Age`.
//!
//! `Vary` is honoured by keying (see [`hedgehog_core::cache::policy`]): a
//! varying response goes under its variant key, with a marker under the
//! plain URL naming the headers and the generation. A cache failure never
//! fails the request: a lookup error is a miss, a store error is logged.

use worker::js_sys::{self, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{console_warn, web_sys, Context};

use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use futures::stream::{self, StreamExt};
use worker::js_sys::Uint8Array;

use super::clock::random_hex;
use super::connections::Connections;
use super::head;
use super::isolate::Shared;
use super::reply::null_body_status;
use super::request_body::HeldClaim;
use hedgehog_core::edge::{
    body_whole, fixed_length, hop_by_hop_fields, updated_by_304, variant_key, vary_rule, EntryMeta,
    HeaderList, StoredMeta, VaryRule, GENERATION_HEADER, HIDDEN_FROM_RUNTIME,
    INTERNAL_HEADER_PREFIX, META_HEADER, NOT_MODIFIED_OMITS, VARY_MARKER_HEADER,
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

fn header_of(head: &HeaderList) -> impl Fn(&str) -> Option<String> + '_ {
    |name| head.get(name).map(Cow::into_owned)
}

/// A stored entry found for a request.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The entry as stored (internal headers and all).
    pub(crate) stored: web_sys::Response,
    /// Its freshness and the origin headers it keeps aside.
    pub(crate) meta: EntryMeta,
}

impl Entry {
    /// Adds its validators to a request as `If-None-Match` /
    /// `If-Modified-Since`; `false` when it has none.
    pub(crate) fn add_validators(&self, headers: &web_sys::Headers) -> worker::Result<bool> {
        let (etag, modified) = (self.header("etag"), self.header("last-modified"));
        if let Some(etag) = &etag {
            headers.set("if-none-match", etag)?;
        }
        if let Some(modified) = &modified {
            headers.set("if-modified-since", modified)?;
        }
        Ok(etag.is_some() || modified.is_some())
    }

    /// A stored header as the origin sent it.
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        if HIDDEN_FROM_RUNTIME.contains(&name) {
            return self.meta.hidden(name).map(str::to_string);
        }
        self.stored.headers().get(name).ok().flatten()
    }
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
    // Each `headers()` and `get` crosses into JavaScript: read once each.
    let plain_headers = plain.headers();
    let get = |name: &str| plain_headers.get(name).ok().flatten();
    let marker = get(VARY_MARKER_HEADER);
    let generation = marker.as_ref().and_then(|_| get(GENERATION_HEADER));
    let (stored, meta) = match (marker, &generation) {
        (Some(names), Some(generation)) => {
            let VaryRule::Headers(names) = vary_rule(Some(&names)) else {
                return Lookup::default();
            };
            // The marker is all headers: its (empty) body is let go now.
            if let Some(body) = plain.body() {
                let _ = body.cancel();
            }
            let variant = match variant_key(url, generation, &names, header_of(request_headers)) {
                Some(key) => match_key(&cache, &key, connections).await,
                None => None,
            };
            let meta = variant
                .as_ref()
                .and_then(|v| v.headers().get(META_HEADER).ok().flatten());
            (variant, meta)
        }
        // A marker of an older format: its variants cannot be told apart.
        (Some(_), None) => (None, None),
        // Never serve a varying response from the plain key (an entry
        // stored some other way): its variant is unknown.
        (None, _) => match vary_rule(get("vary").as_deref()) {
            VaryRule::None => (Some(plain), get(META_HEADER)),
            _ => (None, None),
        },
    };
    let entry = match (stored, meta.as_deref().and_then(EntryMeta::from_header)) {
        (Some(stored), Some(meta)) => Some(Entry { stored, meta }),
        _ => None,
    };
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

/// The fields of a message (`head`) the cache never keeps: the hop-by-hop
/// ones and those its `Connection` names (RFC 9110 section 7.6.1), and
/// anything in the Worker's own namespace.
fn not_end_to_end(head: &HeaderList) -> Vec<&str> {
    let mut fields = hop_by_hop_fields(head);
    fields.extend(
        head.names()
            .filter(|n| n.starts_with(INTERNAL_HEADER_PREFIX)),
    );
    fields
}

/// The client's view of a stored entry: the origin's headers restored, every
/// internal one dropped, `Age` set; `not_modified` gives a bodiless `304`.
/// Touches only the headers the entry's meta says it hides: each header
/// operation crosses into JavaScript, and this is the hit path.
pub(crate) fn served(
    entry: &Entry,
    age_s: u64,
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
    let headers = out.headers();
    headers.delete(META_HEADER)?;
    // The keep time the runtime was given goes; the origin's own
    // Cache-Control, if it had one, is set over it.
    if entry.meta.hidden("cache-control").is_none() {
        headers.delete("cache-control")?;
    }
    for (name, value) in &entry.meta.hidden {
        headers.set(name, value)?;
    }
    headers.set("age", &age_s.to_string())?;
    if not_modified {
        for name in NOT_MODIFIED_OMITS {
            headers.delete(name)?;
        }
    }
    Ok(out)
}

/// The response a `304` revalidation gives the client: the stored body with
/// the stored headers updated by the `304`'s (RFC 9111 section 4.3.4).
pub(crate) fn updated_by(
    entry: &Entry,
    not_modified: &web_sys::Response,
) -> worker::Result<web_sys::Response> {
    let current = served(entry, 0, false)?;
    let headers = current.headers();
    headers.delete("age")?;
    // The 304's end-to-end fields.
    let fresh = head::read(&not_modified.headers());
    let dropped = not_end_to_end(&fresh);
    for name in fresh.names() {
        if !dropped.contains(&name) && updated_by_304(name) {
            if let Some(value) = fresh.get(name) {
                headers.set(name, &value)?;
            }
        }
    }
    Ok(current)
}

/// Where a store goes and what it carries besides the response.
#[derive(Debug)]
pub(crate) struct StoreTarget<'a> {
    /// The request URL (the plain key).
    pub(crate) url: &'a str,
    /// The storing request's headers (they pick the variant).
    pub(crate) request_headers: &'a HeaderList,
    /// The stored response's header fields.
    pub(crate) response_head: &'a HeaderList,
    /// The isolate whose held-body cap the copy claims from.
    pub(crate) isolate: &'a Shared,
    /// The variants' generation found at lookup, if any.
    pub(crate) generation: Option<String>,
    /// The response's freshness, as the core computed it.
    pub(crate) meta: StoredMeta,
    /// How long the runtime keeps it, seconds.
    pub(crate) keep_secs: u64,
}

/// Stores a copy of `response` (the origin's, or one rebuilt from a `304`)
/// once the request is done, then calls `on_stored` if the store succeeded.
/// The copy tees the body: the client's stream is not held back by the
/// cache. Call it before the response's body is handed on. Returns false
/// when the response cannot be stored (its `Vary` makes no usable key),
/// without touching it.
pub(crate) fn store(
    ctx: &Context,
    target: StoreTarget<'_>,
    response: &web_sys::Response,
    connections: &Rc<Connections>,
    on_stored: impl FnOnce() + 'static,
) -> bool {
    match store_task(target, response, connections, on_stored) {
        Some(task) => {
            ctx.wait_until(task);
            true
        }
        None => false,
    }
}

/// The work of [`store`] as a future, for a caller already in the
/// background; `None` when the response cannot be stored.
pub(crate) fn store_task(
    target: StoreTarget<'_>,
    response: &web_sys::Response,
    connections: &Rc<Connections>,
    on_stored: impl FnOnce() + 'static,
) -> Option<LocalBoxFuture<'static, ()>> {
    let cache = default_cache()?;
    let url = target.url;
    let (key, marker) = store_key(&target)?;
    let head = target.response_head;
    let expected_len = fixed_length(
        head.get("content-length").as_deref(),
        head.get("content-encoding").as_deref(),
    );
    // The copy is a tee: what the cache has read and the client has not is
    // held by the runtime. A slow reader on a 48 MiB answer held +114 MB
    // (`node lab/slow-reader.mjs`), so a copy claims its bytes from the
    // isolate's held-body cap (`HEDGE_TUNING.max_held_body_bytes`, shared with
    // request bodies held for replay): a declared length up front (not
    // stored if it does not fit), an unknown one chunk by chunk (the store
    // is dropped at the first chunk that does not fit). The client's answer
    // is never held back either way.
    let mut claim = HeldClaim::new(target.isolate);
    if let Some(len) = expected_len {
        if !claim.try_add(len) {
            return None;
        }
    }
    let (copy, progress) = tracked_copy(
        response,
        head,
        &target.meta,
        target.keep_secs,
        claim,
        expected_len.is_none(),
    )
    .ok()?;
    let url = url.to_string();
    let connections = Rc::clone(connections);
    Some(Box::pin(async move {
        // The copy (a tee) holds what the cache has not yet read, within
        // the held-body cap, while the put waits for a free slot.
        let slot = connections.take().await;
        let stored = JsFuture::from(cache.put_with_str(&key, &copy)).await;
        drop(slot);
        let (whole, over_cap) = {
            let p = progress.borrow();
            let whole = body_whole(expected_len, p.bytes, p.errored, p.ended);
            (whole, p.over_cap)
        };
        if over_cap || (stored.is_ok() && !whole) {
            // Short: taken out again before anyone is served it (a copy cut
            // at the cap can be kept short even though its put failed).
            let _slot = connections.take().await;
            let _ = JsFuture::from(cache.delete_with_str(&key)).await;
            if !over_cap {
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
        }
        match stored {
            Ok(_) => on_stored(),
            Err(e) => console_warn!("hedgehog-edge: cache store failed: {e:?}"),
        }
    }))
}

/// Where the response is stored for `target`'s request: its key and, for a
/// varying response, the marker the plain key gets; `None` when its `Vary`
/// makes no usable key.
fn store_key(target: &StoreTarget<'_>) -> Option<(String, Option<web_sys::Response>)> {
    let vary = target.response_head.get("vary");
    match vary_rule(vary.as_deref()) {
        VaryRule::Unstorable => None,
        VaryRule::None => Some((target.url.to_string(), None)),
        VaryRule::Headers(names) => {
            let generation = (target.generation.clone()).unwrap_or_else(|| random_hex(2));
            let request = header_of(target.request_headers);
            let key = variant_key(target.url, &generation, &names, request)?;
            let marker = marker_response(&names.join(","), &generation, target.keep_secs).ok()?;
            Some((key, Some(marker)))
        }
    }
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

/// The stored form of `response`'s headers: end-to-end only, the headers the
/// runtime would judge freshness by moved into the entry's meta with the
/// freshness the core computed, and a keep time for the runtime.
fn stored_headers(
    response: &web_sys::Response,
    head: &HeaderList,
    meta: &StoredMeta,
    keep_secs: u64,
) -> worker::Result<web_sys::Headers> {
    let headers = web_sys::Headers::new_with_headers(&response.headers())?;
    let dropped = not_end_to_end(head);
    for name in &dropped {
        headers.delete(name)?;
    }
    let mut meta = EntryMeta {
        freshness: *meta,
        hidden: Vec::new(),
    };
    for name in HIDDEN_FROM_RUNTIME {
        // One the `Connection` names was dropped as hop-by-hop.
        if let Some(value) = head.get(name).filter(|_| !dropped.contains(&name)) {
            headers.delete(name)?;
            meta.hidden.push((name.to_string(), value.into_owned()));
        }
    }
    if head.has("age") {
        headers.delete("age")?;
    }
    headers.set(META_HEADER, &meta.to_header())?;
    headers.set("cache-control", &runtime_keep(keep_secs))?;
    Ok(headers)
}

/// The `Cache-Control` that tells the runtime how long to keep an entry.
fn runtime_keep(keep_secs: u64) -> String {
    format!("public, max-age={keep_secs}")
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
    head: &HeaderList,
    meta: &StoredMeta,
    keep_secs: u64,
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
    init.set_headers_headers(&stored_headers(response, head, meta, keep_secs)?);
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

/// The entry under the plain URL of a varying response: no body, the names
/// it varies on, its generation, and as long a keep time as its variant.
fn marker_response(
    names: &str,
    generation: &str,
    keep_secs: u64,
) -> worker::Result<web_sys::Response> {
    let headers = web_sys::Headers::new()?;
    headers.set(VARY_MARKER_HEADER, names)?;
    headers.set(GENERATION_HEADER, generation)?;
    headers.set("cache-control", &runtime_keep(keep_secs))?;
    let init = web_sys::ResponseInit::new();
    init.set_status(200);
    init.set_headers_headers(&headers);
    Ok(web_sys::Response::new_with_opt_str_and_init(None, &init)?)
}
