//! The isolate's one [`Isolate`], made from the configuration on its first
//! request and kept for its life.
//!
//! An isolate handles one request at a time between awaits, so a
//! `thread_local` `RefCell` is enough; borrows never span an await.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use worker::js_sys::{self, JsString, Object, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::Env;

use hedgehog_core::config::{self, ConfigError};
use hedgehog_core::isolate::Isolate;

/// The isolate, shared by its requests (each borrows it between awaits).
pub(crate) type Shared = Rc<RefCell<Isolate>>;

#[derive(Debug)]
enum State {
    Ready(Shared),
    Invalid(Rc<Vec<ConfigError>>),
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// The isolate, made from `env` on the first request; the configuration's
/// errors when it is invalid.
pub(crate) fn get(env: &Env, now_ms: f64) -> Result<Shared, Rc<Vec<ConfigError>>> {
    STATE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let state = slot.get_or_insert_with(|| match config::parse(&read_vars(env)) {
            Ok(params) => State::Ready(Rc::new(RefCell::new(Isolate::new(
                params,
                super::pop::client::configured(env),
                now_ms,
                // Each isolate draws its own primaries (no herding).
                (js_sys::Math::random() * 9.007_199_254_740_991e15) as u64,
            )))),
            Err(errors) => State::Invalid(Rc::new(errors)),
        });
        match state {
            State::Ready(isolate) => Ok(Rc::clone(isolate)),
            State::Invalid(errors) => Err(Rc::clone(errors)),
        }
    })
}

/// Runs `f` on the isolate; `None` before a valid configuration was parsed.
pub(crate) fn with<R>(f: impl FnOnce(&mut Isolate) -> R) -> Option<R> {
    let isolate = STATE.with(|cell| match cell.borrow().as_ref() {
        Some(State::Ready(isolate)) => Some(Rc::clone(isolate)),
        _ => None,
    })?;
    let mut isolate = isolate.try_borrow_mut().ok()?;
    Some(f(&mut isolate))
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
