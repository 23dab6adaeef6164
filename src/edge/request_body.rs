//! Reads a hedgeable request's body into memory, up to the replay caps.
//!
//! A body the hedge must resend is held in memory, but never more than
//! `HEDGE_TUNING.max_body_bytes` of it, and never more than the isolate's
//! `HEDGE_TUNING.max_held_body_bytes` for all bodies at once: a body that outgrows
//! either is forwarded once, as a stream of the bytes read so far followed by
//! the rest, and the request is not hedged. Nothing the client sent is lost.

use futures::stream::{self, StreamExt};
use worker::js_sys::Uint8Array;
use worker::wasm_bindgen::JsValue;
use worker::{web_sys, ByteStream};

use super::isolate;
use hedgehog_core::request::eligibility::NotHedgeableReason;

/// What reading the body found.
#[derive(Debug)]
pub(crate) enum BodyRead {
    /// The whole body, within the caps.
    Held(Vec<u8>),
    /// Over a cap: the whole body as one stream, to be sent once, and why.
    Streamed(web_sys::ReadableStream, NotHedgeableReason),
}

/// Bytes a request body, or a cache copy (`cache::store_task`), holds
/// against the isolate's cap; given back when dropped.
#[derive(Debug, Default)]
pub(crate) struct HeldClaim {
    bytes: u64,
}

impl HeldClaim {
    /// Claims `bytes` more; `false` (and nothing claimed) when they do not fit.
    pub(crate) fn try_add(&mut self, bytes: u64) -> bool {
        let ok = isolate::with(|isolate| isolate.hold_body_bytes(bytes)).unwrap_or(false);
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
            isolate::with(|isolate| isolate.release_body_bytes(bytes));
        }
    }
}

/// Reads `req`'s body, holding at most `cap` bytes, each claimed in `claim`.
pub(crate) async fn read_up_to(
    req: &web_sys::Request,
    cap: u64,
    claim: &mut HeldClaim,
) -> worker::Result<BodyRead> {
    let Some(raw) = req.body() else {
        return Ok(BodyRead::Held(Vec::new()));
    };
    let mut body = ByteStream::from(raw);
    let mut held = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
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
            let whole = wasm_streams::ReadableStream::from_stream(prefix.chain(rest));
            return Ok(BodyRead::Streamed(whole.into_raw(), reason));
        }
    }
    Ok(BodyRead::Held(held))
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
