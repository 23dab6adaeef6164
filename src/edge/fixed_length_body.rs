//! The runtime's `FixedLengthStream`: a body held to a declared length, so
//! one that ends short is an error, not an end.

use worker::js_sys::{self, Function, Promise, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::{spawn_local, JsFuture};
use worker::web_sys;

/// Pipes `body` through the runtime's `FixedLengthStream`, so the response
/// keeps its `Content-Length` (and a short body is an error, not an end).
pub(crate) fn hold_to_length(
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
    // The pipe fails when the body is cut, ends short or its reader goes
    // away; the reader's side already shows it, so the rejection is only consumed.
    spawn_local(async move {
        let _ = JsFuture::from(piping).await;
    });
    Ok(readable)
}
