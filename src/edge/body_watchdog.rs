//! HEDGE_BODY_IDLE_TIMEOUT_MS: a winner's body that stops arriving is cut.
//!
//! Off by default, because watching costs: the body no longer passes through
//! the runtime natively but chunk by chunk through wasm. Dropping the stream
//! the origin's body is read through cancels it, which closes the origin's
//! connection; the client's stream is errored, so the client sees a broken
//! response rather than a short one.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use futures::stream::{self, AbortHandle, Abortable, StreamExt};
use worker::js_sys::{self, Function, Promise, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::{spawn_local, JsFuture};
use worker::{console_warn, web_sys, Delay};

use crate::body_watch::{fixed_length, idle_message};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyState {
    Flowing,
    Cut,
    Ended,
}

/// `response`'s body, cut when the origin sends nothing for `idle_ms`
/// (aborting `origin_fetch`). The origin's `Content-Length` still holds where
/// the body is not encoded.
pub(crate) fn watch(
    response: &web_sys::Response,
    body: web_sys::ReadableStream,
    idle_ms: f64,
    origin_fetch: Option<web_sys::AbortController>,
) -> worker::Result<web_sys::ReadableStream> {
    let headers = response.headers();
    let length = fixed_length(
        headers.get("content-length")?.as_deref(),
        headers.get("content-encoding")?.as_deref(),
    );
    let source = wasm_streams::ReadableStream::from_raw(body)
        .try_into_stream()
        .map_err(|(e, _)| worker::Error::JsError(format!("origin body is locked: {e:?}")))?;
    // One timer per body, not per chunk: chunks only stamp the time, and the
    // watchdog sleeps until the stamp plus the limit, again and again.
    let last_chunk_ms = Rc::new(Cell::new(js_sys::Date::now()));
    let state = Rc::new(Cell::new(BodyState::Flowing));
    let (cut, registration) = AbortHandle::new_pair();
    let stamp = (Rc::clone(&last_chunk_ms), Rc::clone(&state));
    let ending = Rc::clone(&state);
    // After the origin's body ends, or was cut (the source is dropped there,
    // which cancels it), at most one more item: the error that says it was cut.
    let tail = stream::once(async move {
        match ending.replace(BodyState::Ended) {
            BodyState::Cut => Some(Err(js_sys::Error::new(&idle_message(idle_ms)).into())),
            _ => None,
        }
    })
    .filter_map(|item| async move { item });
    let watched = Abortable::new(source, registration)
        .map(move |item| {
            stamp.0.set(js_sys::Date::now());
            if item.is_err() {
                stamp.1.set(BodyState::Ended);
            }
            item
        })
        .chain(tail);
    spawn_local(async move {
        loop {
            let wait_ms = last_chunk_ms.get() + idle_ms - js_sys::Date::now();
            if state.get() == BodyState::Ended {
                return;
            }
            if wait_ms <= 0.0 {
                state.set(BodyState::Cut);
                console_warn!("hedgehog-edge: {}", idle_message(idle_ms));
                cut.abort();
                // Cancelling this copy of the body is not enough when the
                // cache holds a tee of it: abort the fetch itself.
                if let Some(controller) = &origin_fetch {
                    controller.abort();
                }
                return;
            }
            Delay::from(Duration::from_millis(wait_ms.ceil() as u64)).await;
        }
    });
    let watched = wasm_streams::ReadableStream::from_stream(watched).into_raw();
    match length {
        Some(length) => hold_to_length(watched, length),
        None => Ok(watched),
    }
}

/// Pipes `body` through the runtime's `FixedLengthStream`, so the response
/// keeps its `Content-Length` (and a short body is an error, not an end).
fn hold_to_length(
    body: web_sys::ReadableStream,
    length: u64,
) -> worker::Result<web_sys::ReadableStream> {
    let class: Function = Reflect::get(&js_sys::global(), &"FixedLengthStream".into())?
        .dyn_into()
        .map_err(|_| worker::Error::JsError("FixedLengthStream is not available".into()))?;
    let args = js_sys::Array::of1(&JsValue::from_f64(length as f64));
    let fixed = Reflect::construct(&class, &args)?;
    let readable: web_sys::ReadableStream = Reflect::get(&fixed, &"readable".into())?.dyn_into()?;
    let writable = Reflect::get(&fixed, &"writable".into())?;
    let pipe_to: Function = Reflect::get(&body, &"pipeTo".into())?.dyn_into()?;
    let piping: Promise = pipe_to.call1(&body, &writable)?.dyn_into()?;
    // The pipe fails when the watchdog cuts the body or the client goes away;
    // the client's side already shows it, so the rejection is only consumed.
    spawn_local(async move {
        let _ = JsFuture::from(piping).await;
    });
    Ok(readable)
}
