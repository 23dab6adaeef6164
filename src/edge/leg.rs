//! One origin request (a leg of the race), sent with its own abort signal.
//!
//! The request is built with `web_sys` rather than `worker::RequestInit`
//! because `worker::Method` turns any method it does not know (PROPFIND,
//! PURGE, ...) into GET, which a proxy must never do.

use std::future::Future;

use worker::js_sys::{self, Uint8Array};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, AbortSignal, Headers, Response};

use crate::outbound::{HEDGE_ATTEMPT_HEADER, REQUEST_ID_HEADER};
use crate::race::Leg;

/// The request body as the legs can use it.
#[derive(Debug)]
pub(crate) enum OutboundBody {
    /// No body.
    Empty,
    /// Held in memory (bounded by `HEDGE_MAX_BODY_BYTES`): every leg gets a copy.
    Buffered(Vec<u8>),
    /// The client's stream, forwarded once (such requests are never hedged).
    Stream(Option<web_sys::ReadableStream>),
}

/// Everything both legs send, except the URL and the hedge mark.
#[derive(Debug)]
pub(crate) struct OutboundRequest {
    pub(crate) method: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: OutboundBody,
    pub(crate) request_id: String,
}

/// Starts the fetch of one leg; the returned future resolves with the
/// origin's response headers (the body streams afterwards).
pub(crate) fn send(
    url: &str,
    outbound: &mut OutboundRequest,
    leg: Leg,
    signal: &AbortSignal,
) -> worker::Result<impl Future<Output = worker::Result<Response>>> {
    let headers = Headers::new();
    for (name, value) in &outbound.headers {
        headers.append(name, value)?;
    }
    headers.set(REQUEST_ID_HEADER, &outbound.request_id)?;
    if leg == Leg::Hedge {
        headers.set(HEDGE_ATTEMPT_HEADER, "true")?;
    }
    let init = web_sys::RequestInit::new();
    init.set_method(&outbound.method);
    init.set_headers(headers.as_ref());
    // Redirects go back to the client: following one could leave the configured origins.
    init.set_redirect(web_sys::RequestRedirect::Manual);
    let signal_ref: &web_sys::AbortSignal = signal;
    init.set_signal(Some(signal_ref));
    match &mut outbound.body {
        OutboundBody::Empty => {}
        OutboundBody::Buffered(bytes) => {
            let array = Uint8Array::new_with_length(bytes.len() as u32);
            array.copy_from(bytes);
            init.set_body(&array);
        }
        OutboundBody::Stream(stream) => {
            if let Some(stream) = stream.take() {
                init.set_body(&stream);
            }
        }
    }
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let promise = global.fetch_with_str_and_init(url, &init);
    Ok(async move {
        let value: JsValue = JsFuture::from(promise).await?;
        let response: web_sys::Response = value.dyn_into()?;
        Ok(Response::from(response))
    })
}
