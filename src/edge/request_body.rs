//! Reads a hedgeable request's body into memory, up to the replay caps.
//!
//! A body the hedge must resend is held in memory, but never more than
//! `HEDGE_TUNING.max_body_bytes` of it, and never more than the isolate's
//! `HEDGE_TUNING.max_held_body_bytes` for all bodies at once: a body that outgrows
//! either is forwarded once, as a stream of the bytes read so far followed by
//! the rest, and the request is not hedged. Nothing the client sent is lost.
//!
//! A body that breaks off (a read error, or an end short of its declared
//! `Content-Length`) is the client's failure: it is answered 400 and never
//! booked against the origin its leg went to ([`ClientBodyFault`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use worker::js_sys::Uint8Array;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::{spawn_local, JsFuture};
use worker::{web_sys, ByteStream, Delay};

use super::fixed_length_body::pipe_through_runtime;
use super::isolate::{self, Shared};
use hedgehog_core::edge::NotHedgeableReason;

/// What reading the body found.
#[derive(Debug)]
pub(crate) enum BodyRead {
    /// The whole body, within the caps.
    Held(Vec<u8>),
    /// Over a cap: the whole body as one stream, to be sent once, and why.
    Streamed(web_sys::ReadableStream, NotHedgeableReason),
    /// The client's body broke off before its end.
    Broken,
}

/// Whether the client's streamed body broke off, once known: shared
/// between the pipe that forwards it and the race that judges a leg's
/// failure. Unknown while the body is still flowing (or was never watched).
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientBodyFault(Rc<FaultState>);

#[derive(Debug, Default)]
struct FaultState {
    /// `Some(true)`: the client's body broke off; `Some(false)`: the pipe
    /// ended otherwise (the body went whole, or the fetch dropped it).
    verdict: Cell<Option<bool>>,
    /// A pipe watches the body (the runtime had the streams for it).
    watched: Cell<bool>,
    /// The controller of the leg the body streams to: aborted when the
    /// body breaks, so the origin sees a cut request, never an ending.
    leg: RefCell<Option<web_sys::AbortController>>,
}

/// How long a failed leg waits to learn whether the client's body broke:
/// the pipe settles within microtasks of the fetch failing.
const VERDICT_WAIT_MS: u64 = 200;

impl ClientBodyFault {
    /// Whether the client's body broke off (known broken now).
    pub(crate) fn broke(&self) -> bool {
        self.0.verdict.get() == Some(true)
    }

    /// The leg the body streams to, to be cut if the body breaks.
    pub(crate) fn attach(&self, controller: &web_sys::AbortController) {
        *self.0.leg.borrow_mut() = Some(controller.clone());
    }

    /// After a leg failed: waits (briefly) for a watched body's pipe to
    /// settle, then says whether the client's body broke off.
    pub(crate) async fn verdict(&self) -> bool {
        let mut waited = 0;
        while self.0.watched.get() && self.0.verdict.get().is_none() && waited < VERDICT_WAIT_MS {
            Delay::from(Duration::from_millis(2)).await;
            waited += 2;
        }
        self.broke()
    }

    fn settle(&self, broke: bool) {
        self.0.verdict.set(Some(broke));
        if broke {
            if let Some(leg) = self.0.leg.borrow_mut().take() {
                leg.abort();
            }
        }
    }
}

/// Forwards the client's body `source` through one of the runtime's own
/// streams (a `FixedLengthStream` of the declared length, else an
/// `IdentityTransformStream`), piped natively: no chunk crosses into wasm
/// and the origin is sent the declared `Content-Length`. The pipe never
/// aborts the leg's side: the runtime sends an aborted body on as a
/// complete one (an origin received 5 bytes of a broken chunked upload as
/// a whole body, measured), so a body that breaks off is marked in `fault`
/// and its leg is cut through the leg's own controller instead. When the
/// pipe fails, the source says whose failure it was: errored, the client's;
/// cancelled by the fetch (the origin's failure), not.
///
/// `Err` (the runtime lacks these streams): the caller forwards `source`
/// as it is, unwatched.
pub(crate) fn forward(
    source: &web_sys::ReadableStream,
    declared: Option<u64>,
    fault: &ClientBodyFault,
) -> worker::Result<web_sys::ReadableStream> {
    let (readable, piping) = pipe_through_runtime(source, declared, true)?;
    fault.0.watched.set(true);
    let (source, fault) = (source.clone(), fault.clone());
    spawn_local(async move {
        let broke = match JsFuture::from(piping).await {
            Ok(_) => false,
            // The pipe released the source: an errored one rejects `closed`.
            Err(_) => {
                let reader: web_sys::ReadableStreamDefaultReader =
                    source.get_reader().unchecked_into();
                JsFuture::from(reader.closed()).await.is_err()
            }
        };
        fault.settle(broke);
    });
    Ok(readable)
}

/// Bytes a request body, or a cache copy (`cache::store_task`), holds
/// against the isolate's cap; given back when dropped.
#[derive(Debug)]
pub(crate) struct HeldClaim {
    isolate: Shared,
    bytes: u64,
}

impl HeldClaim {
    /// Nothing claimed yet from `isolate`'s cap.
    pub(crate) fn new(isolate: &Shared) -> Self {
        Self {
            isolate: Shared::clone(isolate),
            bytes: 0,
        }
    }

    /// Claims `bytes` more; `false` (and nothing claimed) when they do not fit.
    pub(crate) fn try_add(&mut self, bytes: u64) -> bool {
        let ok = isolate::try_with(&self.isolate, |isolate| isolate.hold_body_bytes(bytes))
            .unwrap_or(false);
        if ok {
            self.bytes += bytes;
        }
        ok
    }
}

impl Drop for HeldClaim {
    fn drop(&mut self) {
        let bytes = self.bytes;
        if bytes > 0 {
            isolate::try_with(&self.isolate, |isolate| isolate.release_body_bytes(bytes));
        }
    }
}

/// Reads `req`'s body, holding at most `cap` bytes, each claimed in
/// `claim`; a body that outgrows them goes on watched for `fault`.
pub(crate) async fn read_up_to(
    req: &web_sys::Request,
    cap: u64,
    declared: Option<u64>,
    claim: &mut HeldClaim,
    fault: &ClientBodyFault,
) -> BodyRead {
    let Some(raw) = req.body() else {
        return BodyRead::Held(Vec::new());
    };
    let mut body = ByteStream::from(raw);
    let mut held = Vec::new();
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else {
            return BodyRead::Broken;
        };
        let over = if held.len() as u64 + chunk.len() as u64 > cap {
            Some(NotHedgeableReason::BodyTooLarge)
        } else if !claim.try_add(chunk.len() as u64) {
            Some(NotHedgeableReason::HeldBodiesFull)
        } else {
            None
        };
        held.extend_from_slice(&chunk);
        if let Some(reason) = over {
            let prefix = stream::once(async move { Ok(to_js(&held)) });
            let rest = body.map(|chunk| match chunk {
                Ok(bytes) => Ok(to_js(&bytes)),
                Err(e) => Err(JsValue::from_str(&e.to_string())),
            });
            let whole = wasm_streams::ReadableStream::from_stream(prefix.chain(rest)).into_raw();
            let stream = forward(&whole, declared, fault).unwrap_or(whole);
            return BodyRead::Streamed(stream, reason);
        }
    }
    if declared.is_some_and(|n| (held.len() as u64) < n) {
        return BodyRead::Broken;
    }
    BodyRead::Held(held)
}

/// Reads `req`'s body to its end, dropping it, and says whether it held any
/// bytes (a GET or HEAD may come with an empty one: `Content-Length: 0`, an
/// empty chunked body). At most `cap` bytes are read: past that it is not
/// empty, and the rest is left. A read error counts as not empty. Reading a
/// small refused body to its end also means the client gets the refusal,
/// not a reset connection while it is still sending.
pub(crate) async fn drain_up_to(req: &web_sys::Request, cap: usize) -> bool {
    let Some(raw) = req.body() else {
        return false;
    };
    let mut body = ByteStream::from(raw);
    let mut read = 0;
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(bytes) => read += bytes.len(),
            Err(_) => return true,
        }
        if read >= cap {
            break;
        }
    }
    read > 0
}

fn to_js(bytes: &[u8]) -> JsValue {
    Uint8Array::from(bytes).into()
}
