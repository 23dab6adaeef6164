//! The client's request as the proxy pipeline (and a refresh it starts) reads it.

use std::rc::Rc;

use worker::web_sys;

use super::connections::Connections;

/// The client's request as the pipeline reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Client<'a> {
    pub(crate) req: &'a web_sys::Request,
    /// Its URL (the cache key).
    pub(crate) url: &'a str,
    pub(crate) headers: &'a web_sys::Headers,
    /// This invocation's subrequests waiting for headers.
    pub(crate) connections: &'a Rc<Connections>,
}
