//! The Workers Cache API (`caches.default`) in front of the race: a hit is
//! served without any origin request or hedge; a storable winner is copied
//! into the cache after the response has gone out.
//!
//! `Vary` is honoured by keying (see [`hedgehog_core::request::cache_policy`]): a varying
//! response goes under its variant key, with a marker under the plain URL;
//! a lookup that finds a marker reads the variant its own request selects.
//! A cache failure never fails the request: a lookup error is a miss, a
//! store error is logged.

use worker::js_sys::{self, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{console_warn, web_sys, Context};

use std::cell::RefCell;
use std::rc::Rc;

use futures::stream::{self, StreamExt};
use worker::js_sys::Uint8Array;

use hedgehog_core::request::body_watch::{body_whole, fixed_length};
use hedgehog_core::request::cache_policy::{variant_key, vary_rule, VaryRule, VARY_MARKER_HEADER};

fn default_cache() -> Option<web_sys::Cache> {
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let storage = global.caches().ok()?;
    Reflect::get(&storage, &JsValue::from_str("default"))
        .ok()?
        .dyn_into::<web_sys::Cache>()
        .ok()
}

async fn match_key(cache: &web_sys::Cache, key: &str) -> Option<web_sys::Response> {
    match JsFuture::from(cache.match_with_str(key)).await {
        Ok(value) => value.dyn_into::<web_sys::Response>().ok(),
        Err(e) => {
            console_warn!("hedgehog-edge: cache lookup failed: {e:?}");
            None
        }
    }
}

fn header_of(headers: &web_sys::Headers) -> impl Fn(&str) -> Option<String> + '_ {
    |name| headers.get(name).ok().flatten()
}

/// The cached response for `url` that may answer a request with these
/// headers, if there is one.
pub(crate) async fn lookup(
    url: &str,
    request_headers: &web_sys::Headers,
) -> Option<web_sys::Response> {
    let cache = default_cache()?;
    let plain = match_key(&cache, url).await?;
    let marker = plain.headers().get(VARY_MARKER_HEADER).ok().flatten();
    match marker {
        Some(names) => {
            let VaryRule::Headers(names) = vary_rule(Some(&names)) else {
                return None;
            };
            let key = variant_key(url, &names, header_of(request_headers))?;
            match_key(&cache, &key).await
        }
        None => {
            // Never serve a varying response from the plain key (an entry
            // stored some other way): its variant is unknown.
            let vary = plain.headers().get("vary").ok().flatten();
            (vary_rule(vary.as_deref()) == VaryRule::None).then_some(plain)
        }
    }
}

/// Stores a copy of `response` to `url` for requests like this one (its
/// headers pick the variant) once the request is done, then calls
/// `on_stored` if the store succeeded. The copy tees the body: the client's
/// stream is not held back by the cache. Call it before the response's body
/// is handed on. Returns false when the response cannot be stored (its
/// `Vary` makes no usable key), without touching it.
pub(crate) fn store(
    ctx: &Context,
    url: &str,
    request_headers: &web_sys::Headers,
    response: &web_sys::Response,
    on_stored: impl FnOnce() + 'static,
) -> bool {
    let Some(cache) = default_cache() else {
        return false;
    };
    let vary = response.headers().get("vary").ok().flatten();
    let (key, marker) = match vary_rule(vary.as_deref()) {
        VaryRule::Unstorable => return false,
        VaryRule::None => (url.to_string(), None),
        VaryRule::Headers(names) => {
            let Some(key) = variant_key(url, &names, header_of(request_headers)) else {
                return false;
            };
            let Ok(marker) = marker_response(&names.join(","), response) else {
                return false;
            };
            (key, Some(marker))
        }
    };
    let headers = response.headers();
    let expected_len = fixed_length(
        headers.get("content-length").ok().flatten().as_deref(),
        headers.get("content-encoding").ok().flatten().as_deref(),
    );
    let Ok((copy, progress)) = tracked_copy(response) else {
        return false;
    };
    let put = cache.put_with_str(&key, &copy);
    let url = url.to_string();
    ctx.wait_until(async move {
        let stored = JsFuture::from(put).await;
        let whole = {
            let p = progress.borrow();
            body_whole(expected_len, p.bytes, p.errored, p.ended)
        };
        if stored.is_ok() && !whole {
            // Stored, but short: take it out again before anyone is served it.
            let _ = JsFuture::from(cache.delete_with_str(&key)).await;
            console_warn!("hedgehog-edge: the origin's body ended early; not cached");
            return;
        }
        // The variant first, the marker after it: a marker always points at
        // a variant that was stored (or is being replaced).
        let mut stored = stored;
        if let (Ok(_), Some(marker)) = (&stored, marker) {
            stored = JsFuture::from(cache.put_with_str(&url, &marker)).await;
        }
        match stored {
            Ok(_) => on_stored(),
            Err(e) => console_warn!("hedgehog-edge: cache store failed: {e:?}"),
        }
    });
    true
}

/// How the cache's copy of a body went, as far as the copy has been read.
#[derive(Debug, Default)]
struct CopyProgress {
    bytes: u64,
    errored: bool,
    ended: bool,
}

/// A copy of `response` (a tee of its body) for the cache, and its progress.
/// The copy passes through the Worker chunk by chunk so the store can tell a
/// whole body from one that ended early: an origin that resets mid-body is
/// relayed by the runtime as an ordinary end, and the cache would keep the
/// short body as if it were the response.
fn tracked_copy(
    response: &web_sys::Response,
) -> worker::Result<(web_sys::Response, Rc<RefCell<CopyProgress>>)> {
    let copy = response.clone()?;
    let progress = Rc::new(RefCell::new(CopyProgress::default()));
    let Some(body) = copy.body() else {
        progress.borrow_mut().ended = true;
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
                Ok(chunk) => p.bytes += u64::from(Uint8Array::new(chunk).length()),
                Err(_) => p.errored = true,
            }
            Some(item)
        })
        .chain(stream::once(async move {
            ending.borrow_mut().ended = true;
            None
        }))
        .filter_map(|item| async move { item });
    let init = web_sys::ResponseInit::new();
    init.set_status(copy.status());
    init.set_headers_headers(&copy.headers());
    let body = wasm_streams::ReadableStream::from_stream(tracked).into_raw();
    let copy = web_sys::Response::new_with_opt_readable_stream_and_init(Some(&body), &init)?;
    Ok((copy, progress))
}

/// The entry under the plain URL of a varying response: no body, the names
/// it varies on, and the response's own freshness so both expire together.
fn marker_response(names: &str, response: &web_sys::Response) -> worker::Result<web_sys::Response> {
    let headers = web_sys::Headers::new()?;
    headers.set(VARY_MARKER_HEADER, names)?;
    if let Some(cc) = response.headers().get("cache-control")? {
        headers.set("cache-control", &cc)?;
    }
    let init = web_sys::ResponseInit::new();
    init.set_status(200);
    init.set_headers_headers(&headers);
    Ok(web_sys::Response::new_with_opt_str_and_init(None, &init)?)
}
