//! Per-isolate state: the parsed configuration and the [`Hedger`], which
//! holds everything the requests' decisions read and write.
//!
//! An isolate handles one request at a time between awaits, so a
//! `thread_local` `RefCell` is enough; borrows never span an await.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use worker::js_sys::{self, JsString, Object, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::Env;

use hedgehog_core::config::{self, ConfigError, Params};
use hedgehog_core::hedger::Hedger;

/// Mutable per-isolate state, available once the configuration is valid.
#[derive(Debug)]
pub(crate) struct Ready {
    pub(crate) params: Rc<Params>,
    /// The races' decisions and what they read and write. Shared, so a
    /// request's race can hold it across awaits (borrowed only between them).
    pub(crate) hedger: Rc<RefCell<Hedger>>,
}

#[derive(Debug)]
enum Isolate {
    // Boxed: `Ready` is large and the enum lives once per isolate anyway.
    Ready(Box<Ready>),
    Invalid(Rc<Vec<ConfigError>>),
}

thread_local! {
    static ISOLATE: RefCell<Option<Isolate>> = const { RefCell::new(None) };
}

/// The configuration, parsed from `env` on the isolate's first request.
pub(crate) fn params(env: &Env, now_ms: f64) -> Result<Rc<Params>, Rc<Vec<ConfigError>>> {
    ISOLATE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let isolate = slot.get_or_insert_with(|| match config::parse(&read_vars(env)) {
            Ok(params) => Isolate::Ready(Box::new(Ready {
                hedger: Rc::new(RefCell::new(Hedger::new(
                    params.clone(),
                    super::pop::client::configured(env),
                    now_ms,
                    // Each isolate draws its own primaries (no herding).
                    (js_sys::Math::random() * 9.007_199_254_740_991e15) as u64,
                ))),
                params: Rc::new(params),
            })),
            Err(errors) => Isolate::Invalid(Rc::new(errors)),
        });
        match isolate {
            Isolate::Ready(ready) => Ok(ready.params.clone()),
            Isolate::Invalid(errors) => Err(errors.clone()),
        }
    })
}

/// The isolate's Hedger; `None` before a valid configuration was parsed.
pub(crate) fn hedger() -> Option<Rc<RefCell<Hedger>>> {
    with_ready(|ready| Rc::clone(&ready.hedger))
}

/// Runs `f` on the isolate's state; `None` before a valid configuration was parsed.
pub(crate) fn with_ready<R>(f: impl FnOnce(&mut Ready) -> R) -> Option<R> {
    ISOLATE.with(|cell| match cell.borrow_mut().as_mut() {
        Some(Isolate::Ready(ready)) => Some(f(ready)),
        _ => None,
    })
}

/// Every `HEDGE_*` var as text. Structured vars (a TOML table or array in
/// `[vars]`) arrive as objects and are turned back into JSON.
pub(crate) fn read_vars(env: &Env) -> BTreeMap<String, String> {
    let env_value: &JsValue = env.as_ref();
    let mut vars = BTreeMap::new();
    let Some(object) = env_value.dyn_ref::<Object>() else {
        return vars;
    };
    for key in Object::keys(object).iter().filter_map(|k| k.as_string()) {
        if !key.starts_with("HEDGE_") {
            continue;
        }
        let Ok(value) = Reflect::get(object, &JsValue::from_str(&key)) else {
            continue;
        };
        let text = match value.as_string() {
            Some(s) => Some(s),
            None => js_sys::JSON::stringify(&value)
                .ok()
                .map(|s: JsString| String::from(s)),
        };
        if let Some(text) = text {
            vars.insert(key, text);
        }
    }
    vars
}
