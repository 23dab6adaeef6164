//! An `AbortSignal` as a future: the incoming request's signal, which workerd
//! aborts when the client disconnects, turned into a race event.
//!
//! The listener is removed and freed when the future is dropped. Waiting on
//! a promise instead (a `JsFuture`) leaked its callbacks for every request
//! whose client stayed, which is nearly all: wasm-bindgen-futures frees them
//! only when the promise settles. That was ~140 bytes of wasm memory for
//! every request not hedged at once (a POST, an OPTIONS, a route with hedging
//! off): 0.8 MiB per 6,000 such requests on d5f2471.

use futures::channel::oneshot;
use futures::future::{FutureExt, LocalBoxFuture};
use worker::js_sys::{Function, Reflect};
use worker::wasm_bindgen::closure::Closure;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::web_sys;

/// The `abort` listener on a signal, taken off again when dropped.
struct Listener {
    target: JsValue,
    callback: Closure<dyn FnMut()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some((_, remove)) = methods(&self.target) {
            let _ = remove.call2(
                &self.target,
                &JsValue::from_str("abort"),
                self.callback.as_ref().unchecked_ref(),
            );
        }
    }
}

thread_local! {
    /// `EventTarget.prototype`'s `addEventListener` and
    /// `removeEventListener`, looked up on the first signal: the same two
    /// functions for every request, read once rather than twice a request.
    static METHODS: std::cell::OnceCell<Option<(Function, Function)>> =
        const { std::cell::OnceCell::new() };
}

/// The signal's `addEventListener` and `removeEventListener` (through
/// Reflect: the signal is an EventTarget, and this needs no extra web-sys
/// features); `None` when the runtime offers no way to listen.
fn methods(target: &JsValue) -> Option<(Function, Function)> {
    METHODS.with(|m| {
        m.get_or_init(|| {
            let get = |name: &str| {
                Reflect::get(target, &JsValue::from_str(name))
                    .ok()
                    .and_then(|f| f.dyn_into::<Function>().ok())
            };
            Some((get("addEventListener")?, get("removeEventListener")?))
        })
        .clone()
    })
}

/// Resolves once `signal` is aborted (at once if it already is); never, if
/// the runtime offers no way to listen.
pub(crate) fn aborted(signal: &web_sys::AbortSignal) -> LocalBoxFuture<'static, ()> {
    if signal.aborted() {
        return futures::future::ready(()).boxed_local();
    }
    let target: JsValue = signal.clone().into();
    let Some((listen, _)) = methods(&target) else {
        return futures::future::pending().boxed_local();
    };
    let (tx, rx) = oneshot::channel::<()>();
    let mut tx = Some(tx);
    let callback = Closure::wrap(Box::new(move || {
        if let Some(tx) = tx.take() {
            let _ = tx.send(());
        }
    }) as Box<dyn FnMut()>);
    let _ = listen.call2(
        &target,
        &JsValue::from_str("abort"),
        callback.as_ref().unchecked_ref(),
    );
    let listener = Listener { target, callback };
    async move {
        // Held until the future is done or dropped.
        let _listener = listener;
        let _ = rx.await;
    }
    .boxed_local()
}
