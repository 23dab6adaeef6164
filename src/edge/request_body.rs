//! Reads a hedgeable request's body into memory, up to the replay cap.
//!
//! A body the hedge must resend is held in memory, but never more than
//! `HEDGE_MAX_BODY_BYTES` of it: a body that turns out larger is forwarded
//! once, as a stream of the bytes read so far followed by the rest, and the
//! request is not hedged. Nothing the client sent is lost either way.

use futures::stream::{self, StreamExt};
use worker::js_sys::Uint8Array;
use worker::wasm_bindgen::JsValue;
use worker::{web_sys, ByteStream};

/// What reading the body found.
#[derive(Debug)]
pub(crate) enum BodyRead {
    /// The whole body, within the cap.
    Held(Vec<u8>),
    /// Over the cap: the whole body as one stream, to be sent once.
    TooLarge(web_sys::ReadableStream),
}

/// Reads `req`'s body, holding at most `cap` bytes.
pub(crate) async fn read_up_to(req: &web_sys::Request, cap: u64) -> worker::Result<BodyRead> {
    let Some(raw) = req.body() else {
        return Ok(BodyRead::Held(Vec::new()));
    };
    let mut body = ByteStream::from(raw);
    let mut held = Vec::new();
    while let Some(chunk) = body.next().await {
        held.extend_from_slice(&chunk?);
        if held.len() as u64 > cap {
            let prefix = stream::once(async move { Ok(to_js(&held)) });
            let rest = body.map(|chunk| match chunk {
                Ok(bytes) => Ok(to_js(&bytes)),
                Err(e) => Err(JsValue::from_str(&e.to_string())),
            });
            let whole = wasm_streams::ReadableStream::from_stream(prefix.chain(rest));
            return Ok(BodyRead::TooLarge(whole.into_raw()));
        }
    }
    Ok(BodyRead::Held(held))
}

fn to_js(bytes: &[u8]) -> JsValue {
    Uint8Array::from(bytes).into()
}
