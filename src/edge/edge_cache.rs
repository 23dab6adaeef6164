//! The Workers Cache API (`caches.default`) in front of the race: a hit is
//! served without any origin request or hedge; a storable winner is copied
//! into the cache after the response has gone out.
//!
//! `Vary` is honoured by keying (see [`crate::cache_policy`]): a varying
//! response goes under its variant key, with a marker under the plain URL;
//! a lookup that finds a marker reads the variant its own request selects.
//! A cache failure never fails the request: a lookup error is a miss, a
//! store error is logged.

use worker::js_sys::{self, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{console_warn, web_sys, Context};

use crate::cache_policy::{variant_key, vary_rule, VaryRule, VARY_MARKER_HEADER};

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
    let Ok(copy) = response.clone() else {
        return false;
    };
    let put = cache.put_with_str(&key, &copy);
    let put_marker = marker.map(|m| cache.put_with_str(url, &m));
    ctx.wait_until(async move {
        let stored = JsFuture::from(put).await;
        let marked = match put_marker {
            Some(p) => JsFuture::from(p).await.map(|_| JsValue::UNDEFINED),
            None => Ok(JsValue::UNDEFINED),
        };
        match (stored, marked) {
            (Ok(_), Ok(_)) => on_stored(),
            (Err(e), _) | (_, Err(e)) => {
                console_warn!("hedgehog-edge: cache store failed: {e:?}")
            }
        }
    });
    true
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
