//! WebSocket upgrades, passed through to the primary origin.
//!
//! An upgrade is one long-lived exchange, not a request that can be sent
//! twice, so it is never hedged, cached or coalesced. The client's headers go
//! on as they are (less `x-hedge-*`, with the request id) with the `Upgrade`
//! header kept, and the origin's `101` response, which carries the socket, is
//! returned untouched: re-wrapping it would drop the socket.

use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{console_error, js_sys, web_sys};

use super::reply::Failure;
use hedgehog_core::edge::REQUEST_ID_HEADER;

/// Forwards the upgrade request `req` to `url` on the primary origin (the
/// isolate chose it as it chooses every primary).
pub(crate) async fn pass_through(
    req: &web_sys::Request,
    url: &str,
    request_id: &str,
    strip_authorization: bool,
) -> worker::Result<web_sys::Response> {
    let headers = web_sys::Headers::new_with_headers(&req.headers())?;
    if strip_authorization {
        headers.delete("authorization")?;
    }
    let hedge_headers: Vec<String> = headers
        .keys()
        .into_iter()
        .filter_map(|k| k.ok()?.as_string())
        .filter(|name| name.starts_with("x-hedge-"))
        .collect();
    for name in hedge_headers {
        headers.delete(&name)?;
    }
    headers.set(REQUEST_ID_HEADER, request_id)?;
    let init = web_sys::RequestInit::new();
    init.set_method(&req.method());
    init.set_headers(&headers);
    init.set_redirect(web_sys::RequestRedirect::Manual);
    let request = match web_sys::Request::new_with_str_and_init(url, &init) {
        Ok(request) => request,
        Err(e) => {
            console_error!(
                "hedgehog-edge: request {request_id}: could not build the upgrade: {e:?}"
            );
            return Failure::Internal.response(request_id);
        }
    };
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    match JsFuture::from(global.fetch_with_request(&request)).await {
        Ok(response) => Ok(response.dyn_into::<web_sys::Response>()?),
        Err(e) => {
            console_error!("hedgehog-edge: request {request_id}: upgrade to {url} failed: {e:?}");
            Failure::OriginUnreachable.response(request_id)
        }
    }
}
