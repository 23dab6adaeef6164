//! One origin request (a leg of the race), sent with its own abort signal.
//!
//! Requests are built with `web_sys` directly: `worker::Method` turns any
//! method it does not know (PROPFIND, PURGE, ...) into GET, which a proxy must
//! never do, and copying headers natively (`new Headers(init)`) costs far less
//! than moving each one through wasm.

use std::future::Future;

use worker::js_sys::{self, Uint8Array};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys;

use super::request_body::ClientBodyFault;
use hedgehog_core::edge::{Exchange, Leg, LegRequest, HEDGE_ATTEMPT_HEADER, REQUEST_ID_HEADER};

/// The request body as the legs can use it.
#[derive(Debug)]
pub(crate) enum OutboundBody {
    /// No body.
    Empty,
    /// Held in memory (bounded by `HEDGE_TUNING.max_body_bytes`): every leg gets a copy.
    Buffered(Vec<u8>),
    /// A stream forwarded once (such requests are never hedged).
    Stream(Option<web_sys::ReadableStream>),
}

/// Everything both legs send, except the URL and the hedge mark.
#[derive(Debug)]
pub(crate) struct OutboundRequest {
    pub(crate) method: String,
    /// The client's headers less the dropped ones, with the request id set.
    pub(crate) headers: web_sys::Headers,
    pub(crate) body: OutboundBody,
    /// Set when the client's streamed body broke off: a leg that failed
    /// then failed for the client's sake, not the origin's.
    pub(crate) client_body: ClientBodyFault,
}

/// The headers both legs send: the client's, natively copied, less those
/// the exchange drops (hop-by-hop and `x-hedge-*` ones, an `Authorization`
/// carrying an operator token), plus the request id.
pub(crate) fn outbound_headers(
    client: &web_sys::Headers,
    exchange: &Exchange,
) -> worker::Result<web_sys::Headers> {
    let request_id = &exchange.request_id;
    let headers = web_sys::Headers::new_with_headers(client)?;
    for name in &exchange.dropped_headers {
        headers.delete(name)?;
    }
    headers.set(REQUEST_ID_HEADER, request_id)?;
    Ok(headers)
}

/// Starts the fetch of one leg (`request`: its URL and its span); the
/// returned future resolves with the origin's response headers (the body
/// streams afterwards).
pub(crate) fn send(
    request: &LegRequest,
    outbound: &mut OutboundRequest,
    leg: Leg,
    signal: &web_sys::AbortSignal,
) -> worker::Result<impl Future<Output = worker::Result<web_sys::Response>>> {
    let init = web_sys::RequestInit::new();
    init.set_method(&outbound.method);
    if leg == Leg::Hedge {
        let headers = web_sys::Headers::new_with_headers(&outbound.headers)?;
        headers.set(HEDGE_ATTEMPT_HEADER, "true")?;
        headers.set("traceparent", &request.traceparent)?;
        init.set_headers(&headers);
    } else {
        outbound.headers.set("traceparent", &request.traceparent)?;
        init.set_headers(&outbound.headers);
    }
    // Redirects go back to the client: following one could leave the configured origins.
    init.set_redirect(web_sys::RequestRedirect::Manual);
    init.set_signal(Some(signal));
    match &mut outbound.body {
        OutboundBody::Empty => {}
        OutboundBody::Buffered(bytes) => init.set_body(&Uint8Array::from(bytes.as_slice())),
        OutboundBody::Stream(stream) => {
            if let Some(stream) = stream.take() {
                init.set_body(&stream);
            }
        }
    }
    // Built here, not inside fetch(): a request the runtime refuses to build
    // (a bad header, a body on GET) fails now, as the Worker's own error,
    // instead of as a rejected fetch that would be booked against the origin.
    let request = web_sys::Request::new_with_str_and_init(&request.url, &init)?;
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let promise = global.fetch_with_request(&request);
    Ok(async move {
        let value: JsValue = JsFuture::from(promise).await?;
        Ok(value.dyn_into::<web_sys::Response>()?)
    })
}
