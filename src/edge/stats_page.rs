//! The stats endpoint: what this isolate knows, as JSON, behind a bearer
//! token. Served only when a token is configured; compared in constant time.

use std::rc::Rc;

use worker::js_sys::{ArrayBuffer, WebAssembly};
use worker::wasm_bindgen::JsCast;
use worker::web_sys;

use super::clock::now_ms;
use super::isolate::Shared;
use super::reply;
use hedgehog_core::observe::route_stats::bearer_matches;

fn wasm_memory_bytes() -> f64 {
    worker::wasm_bindgen::memory()
        .dyn_into::<WebAssembly::Memory>()
        .ok()
        .and_then(|m| m.buffer().dyn_into::<ArrayBuffer>().ok())
        .map_or(0.0, |b| f64::from(b.byte_length()))
}

/// The stats response for a request to the stats path (served only when a
/// token is configured: the isolate routes here only then).
pub(crate) fn respond(
    shared: &Shared,
    method: &str,
    authorization: Option<&str>,
    request_id: &str,
) -> worker::Result<web_sys::Response> {
    let mut isolate = shared.borrow_mut();
    let params = Rc::clone(isolate.params());
    let Some(token) = params.stats.token.as_ref() else {
        return reply::internal_error(request_id);
    };
    if !bearer_matches(authorization, token.expose()) {
        return reply::unauthorized(request_id);
    }
    if method != "GET" {
        return reply::method_not_allowed("GET", request_id);
    }
    let body = isolate.stats(wasm_memory_bytes(), now_ms());
    reply::json_response(200, &body, &[("cache-control", "no-store")])
}
