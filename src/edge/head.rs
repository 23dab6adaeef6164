//! A message's head: its headers read from the runtime in one go, for the
//! core and the glue to look up at no further crossing into JavaScript, and
//! whether its status lets it carry a body.

use worker::{js_sys, web_sys};

use hedgehog_core::edge::HeaderList;

/// Every field of `headers` (`Array.from(headers).flat().join("\n")`: a
/// handful of calls into JavaScript where a `get` per name was one each).
pub(crate) fn read(headers: &web_sys::Headers) -> HeaderList {
    let joined = js_sys::Array::from(headers).flat(1).join("\n");
    HeaderList::from_joined(joined.into())
}

/// Statuses whose responses carry no body (Fetch standard "null body
/// status"): the runtime refuses to build one with a body, even an empty one.
pub(crate) fn null_body_status(status: u16) -> bool {
    matches!(status, 101 | 103 | 204 | 205 | 304)
}
