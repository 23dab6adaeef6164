//! HEDGE_BODY_IDLE_TIMEOUT_MS: a winner's body that stops arriving is cut.
//!
//! Off by default, because watching costs: the body no longer passes through
//! the runtime natively but chunk by chunk through wasm. Dropping the stream
//! the origin's body is read through cancels it, which closes the origin's
//! connection; the client's stream is errored, so the client sees a broken
//! response rather than a short one.

use std::cell::Cell;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use futures::stream::{self, AbortHandle, Abortable, Stream, StreamExt};
use worker::js_sys;
use worker::wasm_bindgen_futures::spawn_local;
use worker::{console_warn, web_sys, Delay};

use super::fixed_length_body::hold_to_length;
use hedgehog_core::edge::idle_message;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyState {
    Flowing,
    Cut,
    Ended,
}

/// A response's body, cut when the origin sends nothing for `idle_ms`
/// (aborting `origin_fetch`). Its declared `length` (the completion's
/// `body_length`: the origin's `Content-Length` where the body is not
/// encoded) still holds.
pub(crate) fn watch(
    length: Option<u64>,
    body: web_sys::ReadableStream,
    idle_ms: f64,
    origin_fetch: Option<web_sys::AbortController>,
) -> worker::Result<web_sys::ReadableStream> {
    let source = wasm_streams::ReadableStream::from_raw(body)
        .try_into_stream()
        .map_err(|(e, _)| worker::Error::JsError(format!("origin body is locked: {e:?}")))?;
    // The origin's silence is the time the reader has been *waiting* for
    // its next chunk: a slow client that has not asked for more (its side of
    // the stream is full) is not the origin's fault. Each poll that finds no
    // chunk stamps when the wait began; a chunk clears it. One timer per
    // body, not per chunk: the watchdog sleeps until the stamp plus the limit.
    let waiting_since: Rc<Cell<Option<f64>>> = Rc::new(Cell::new(None));
    let state = Rc::new(Cell::new(BodyState::Flowing));
    let (cut, registration) = AbortHandle::new_pair();
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
    let mut source = Box::pin(Abortable::new(source, registration));
    let (waiting, flowing) = (Rc::clone(&waiting_since), Rc::clone(&state));
    let watched = stream::poll_fn(move |cx| {
        let polled = source.as_mut().poll_next(cx);
        match &polled {
            Poll::Pending => {
                if waiting.get().is_none() {
                    waiting.set(Some(js_sys::Date::now()));
                }
            }
            Poll::Ready(item) => {
                waiting.set(None);
                if matches!(item, Some(Err(_))) {
                    flowing.set(BodyState::Ended);
                }
            }
        }
        polled
    })
    .chain(tail);
    spawn_local(watchdog(state, waiting_since, idle_ms, cut, origin_fetch));
    let watched = wasm_streams::ReadableStream::from_stream(watched).into_raw();
    match length {
        Some(length) => hold_to_length(watched, length),
        None => Ok(watched),
    }
}

/// Cuts the body (`cut`, and the origin's fetch) once the reader has
/// waited `idle_ms` for its next chunk; ends with the body.
async fn watchdog(
    state: Rc<Cell<BodyState>>,
    waiting_since: Rc<Cell<Option<f64>>>,
    idle_ms: f64,
    cut: AbortHandle,
    origin_fetch: Option<web_sys::AbortController>,
) {
    loop {
        if state.get() == BodyState::Ended {
            return;
        }
        // Not waiting: the reader has not asked for more; look again later.
        let wait_ms = waiting_since
            .get()
            .map_or(idle_ms, |since| since + idle_ms - js_sys::Date::now());
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
}
