//! The client's request as the proxy pipeline (and a refresh it starts) reads it.

use std::rc::Rc;

use worker::web_sys;

use super::connections::Connections;
use hedgehog_core::edge::HeaderList;

/// The client's request as the pipeline reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Client<'a> {
    pub(crate) req: &'a web_sys::Request,
    /// Its URL (the cache key).
    pub(crate) url: &'a str,
    /// Its headers, in the runtime (copied natively onto each leg)...
    pub(crate) headers: &'a web_sys::Headers,
    /// ... and as the value read once, for every rule that looks one up.
    pub(crate) head: &'a HeaderList,
    /// This invocation's subrequests waiting for headers.
    pub(crate) connections: &'a Rc<Connections>,
}
