//! Pushes an isolate's delta to its PoP aggregator (a Durable Object named
//! from `cf.colo`) inside `ctx.wait_until`, after the response has gone out,
//! and takes the reply into the isolate's view of the PoP.
//!
//! A push never delays a request: it is started after the response is built
//! and runs in the background with its own timeout. Failures are logged,
//! counted and back off (see [`hedgehog_core::pop::link`]).

use std::rc::Rc;
use std::time::Duration;

use futures::future::{select, Either};
use futures::FutureExt;
use worker::js_sys::{Reflect, Uint8Array};
use worker::wasm_bindgen::JsValue;
use worker::{
    console_warn, web_sys, Context, Delay, Env, Headers, Method, ObjectNamespace, RequestInit,
};

use crate::edge::clock::now_ms;
use crate::edge::connections::Connections;
use crate::edge::env_vars::POP_BINDING;
use crate::edge::isolate::{self, Shared};
use crate::edge::pop::aggregate::POP_NAME_HEADER;
use hedgehog_core::edge::PushReply;

/// Sends `body`, a push the isolate found due, in the background; the
/// reply goes back to the isolate.
pub(crate) fn push(
    ctx: &Context,
    env: &Env,
    req: &web_sys::Request,
    shared: &Shared,
    connections: &Rc<Connections>,
    body: Vec<u8>,
) {
    let Ok(namespace) = env.durable_object(POP_BINDING) else {
        return;
    };
    let (name, timeout_ms) = {
        let isolate = shared.borrow();
        let pop = &isolate.params().pop;
        let name = colo(req).unwrap_or_else(|| pop.fallback_name.clone());
        (name, pop.timeout_ms)
    };
    let connections = Rc::clone(connections);
    let shared = Shared::clone(shared);
    ctx.wait_until(async move {
        let bytes = body.len();
        let slot = connections.take().await;
        let outcome = send(&namespace, &name, body, timeout_ms).await;
        drop(slot);
        let now = now_ms();
        match outcome {
            Ok(reply) => {
                isolate::try_with(&shared, |isolate| isolate.push_succeeded(&reply, bytes, now));
            }
            Err(e) => {
                let failures =
                    isolate::try_with(&shared, |isolate| isolate.push_failed(now)).unwrap_or(0);
                console_warn!(
                    "hedgehog-edge: PoP aggregator push failed ({failures} in a row, backing off): {e}"
                );
            }
        }
    });
}

/// The PoP's name: the request's `cf.colo`, if the runtime gives one.
pub(crate) fn colo(req: &web_sys::Request) -> Option<String> {
    let cf = Reflect::get(req, &JsValue::from_str("cf")).ok()?;
    if cf.is_undefined() || cf.is_null() {
        return None;
    }
    Reflect::get(&cf, &JsValue::from_str("colo"))
        .ok()?
        .as_string()
        .filter(|c| !c.is_empty())
}

async fn send(
    namespace: &ObjectNamespace,
    name: &str,
    body: Vec<u8>,
    timeout_ms: f64,
) -> Result<PushReply, String> {
    let exchange = async move {
        let (status, bytes) = ask(namespace, name, Method::Post, "push", Some(body), None).await?;
        if status != 200 {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
            return Err(format!("status {status}: {text}"));
        }
        PushReply::decode(&bytes).map_err(|e| e.to_string())
    };
    let timer = Delay::from(Duration::from_millis(timeout_ms.max(1.0) as u64));
    match select(exchange.boxed_local(), timer).await {
        Either::Left((result, _)) => result,
        Either::Right(_) => Err(format!("no reply within {timeout_ms} ms")),
    }
}

/// One exchange with the aggregator named `name`: `method` on `path`, with
/// `body`, the PoP's name in [`POP_NAME_HEADER`] and `accept` if given; its
/// status and body. (Pushes and the PoP-scope metrics share it, so the
/// request-building code is in the Worker once.)
pub(crate) async fn ask(
    namespace: &ObjectNamespace,
    name: &str,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
    accept: Option<&str>,
) -> Result<(u16, Vec<u8>), String> {
    let stub = namespace
        .id_from_name(name)
        .and_then(|id| id.get_stub())
        .map_err(|e| format!("no stub for {name}: {e}"))?;
    let headers = Headers::new();
    headers
        .set(POP_NAME_HEADER, name)
        .and_then(|()| accept.map_or(Ok(()), |a| headers.set("accept", a)))
        .map_err(|e| format!("building the request: {e}"))?;
    let mut init = RequestInit::new();
    init.with_method(method)
        .with_headers(headers)
        .with_body(body.map(|b| Uint8Array::from(b.as_slice()).into()));
    let url = format!("https://pop-aggregator/{path}");
    let request = worker::Request::new_with_init(&url, &init)
        .map_err(|e| format!("building the request: {e}"))?;
    let mut response = stub
        .fetch_with_request(request)
        .await
        .map_err(|e| format!("unreachable: {e}"))?;
    let status = response.status_code();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| format!("reading the reply: {e}"))?;
    Ok((status, bytes))
}
