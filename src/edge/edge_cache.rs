//! The Workers Cache API (`caches.default`) in front of the race: a hit is
//! served without any origin request or hedge; a storable winner is copied
//! into the cache after the response has gone out.
//!
//! A cache failure never fails the request: a lookup error is a miss, a
//! store error is logged.

use worker::js_sys::{self, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{console_warn, web_sys, Context};

fn default_cache() -> Option<web_sys::Cache> {
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let storage = global.caches().ok()?;
    Reflect::get(&storage, &JsValue::from_str("default"))
        .ok()?
        .dyn_into::<web_sys::Cache>()
        .ok()
}

/// The cached response for `url`, if there is one.
pub(crate) async fn lookup(url: &str) -> Option<web_sys::Response> {
    let cache = default_cache()?;
    match JsFuture::from(cache.match_with_str(url)).await {
        Ok(value) => value.dyn_into::<web_sys::Response>().ok(),
        Err(e) => {
            console_warn!("hedgehog-edge: cache lookup failed: {e:?}");
            None
        }
    }
}

/// Stores a copy of `response` under `url` once the request is done, then
/// calls `on_stored` if the store succeeded. The copy tees the body: the
/// client's stream is not held back by the cache. Call it before the
/// response's body is handed on.
pub(crate) fn store(
    ctx: &Context,
    url: &str,
    response: &web_sys::Response,
    on_stored: impl FnOnce() + 'static,
) {
    let (Some(cache), Ok(copy)) = (default_cache(), response.clone()) else {
        return;
    };
    let put = cache.put_with_str(url, &copy);
    ctx.wait_until(async move {
        match JsFuture::from(put).await {
            Ok(_) => on_stored(),
            Err(e) => console_warn!("hedgehog-edge: cache store failed: {e:?}"),
        }
    });
}
