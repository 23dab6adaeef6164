//! The client's request as the proxy pipeline (and a refresh it starts) reads it.

use worker::web_sys;

/// The client's request as the pipeline reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Client<'a> {
    pub(crate) req: &'a web_sys::Request,
    /// Its URL (the cache key).
    pub(crate) url: &'a str,
    pub(crate) headers: &'a web_sys::Headers,
}
