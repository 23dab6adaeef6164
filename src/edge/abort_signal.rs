//! An `AbortSignal` as a future: the incoming request's signal, which workerd
//! aborts when the client disconnects, turned into a race event.

use futures::future::{FutureExt, LocalBoxFuture};
use worker::js_sys::{self, Function, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys;

/// Resolves once `signal` is aborted (at once if it already is); never, if
/// the runtime offers no way to listen.
pub(crate) fn aborted(signal: &web_sys::AbortSignal) -> LocalBoxFuture<'static, ()> {
    if signal.aborted() {
        return futures::future::ready(()).boxed_local();
    }
    let target: JsValue = signal.clone().into();
    let promise = js_sys::Promise::new(&mut |resolve, _reject| {
        // addEventListener through Reflect: the signal is an EventTarget, and
        // this needs no extra web-sys features.
        let listen = Reflect::get(&target, &JsValue::from_str("addEventListener"))
            .ok()
            .and_then(|f| f.dyn_into::<Function>().ok());
        if let Some(listen) = listen {
            let _ = listen.call2(&target, &JsValue::from_str("abort"), &resolve);
        }
    });
    async move {
        let _ = JsFuture::from(promise).await;
    }
    .boxed_local()
}
