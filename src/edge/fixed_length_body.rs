//! The runtime's own byte streams (`FixedLengthStream`,
//! `IdentityTransformStream`): a body piped through one moves natively (no
//! chunk crosses into wasm), and a `FixedLengthStream` holds it to a
//! declared length, so one that ends short is an error, not an end.

use worker::js_sys::{self, Function, Object, Promise, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::{spawn_local, JsFuture};
use worker::web_sys;

/// Pipes `source` through a new runtime stream: a `FixedLengthStream` of
/// `length` bytes, or an `IdentityTransformStream` without one. Returns its
/// readable side and the pipe; `prevent_abort` keeps a failing source from
/// aborting the readable side (which the runtime's fetch would read as an
/// end). `Err` when the runtime lacks these streams (the source is untouched).
pub(crate) fn pipe_through_runtime(
    source: &web_sys::ReadableStream,
    length: Option<u64>,
    prevent_abort: bool,
) -> worker::Result<(web_sys::ReadableStream, Promise)> {
    let (class, args) = match length {
        Some(length) => (
            "FixedLengthStream",
            js_sys::Array::of1(&JsValue::from_f64(length as f64)),
        ),
        None => ("IdentityTransformStream", js_sys::Array::new()),
    };
    let constructor: Function = Reflect::get(&js_sys::global(), &class.into())?
        .dyn_into()
        .map_err(|_| worker::Error::JsError(format!("{class} is not available")))?;
    let through = Reflect::construct(&constructor, &args)?;
    let readable: web_sys::ReadableStream =
        Reflect::get(&through, &"readable".into())?.dyn_into()?;
    let writable = Reflect::get(&through, &"writable".into())?;
    let options = Object::new();
    if prevent_abort {
        Reflect::set(&options, &"preventAbort".into(), &JsValue::TRUE)?;
    }
    let pipe_to: Function = Reflect::get(source, &"pipeTo".into())?.dyn_into()?;
    let piping: Promise = pipe_to.call2(source, &writable, &options)?.dyn_into()?;
    Ok((readable, piping))
}

/// Pipes `body` through the runtime's `FixedLengthStream`, so the response
/// keeps its `Content-Length` (and a short body is an error, not an end).
pub(crate) fn hold_to_length(
    body: web_sys::ReadableStream,
    length: u64,
) -> worker::Result<web_sys::ReadableStream> {
    let (readable, piping) = pipe_through_runtime(&body, Some(length), false)?;
    // The pipe fails when the body is cut, ends short or its reader goes
    // away; the reader's side already shows it, so the rejection is only consumed.
    spawn_local(async move {
        let _ = JsFuture::from(piping).await;
    });
    Ok(readable)
}
