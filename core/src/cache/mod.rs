//! The shared cache's rules (RFC 9111, RFC 5861, RFC 9213): what may be
//! stored and for whom, how long it stays fresh, what a write invalidates,
//! and how a stored response answers conditional requests and is updated by
//! a `304`.
//!
//! - [`directives`]: `Cache-Control` and the targeted `CDN-Cache-Control` fields.
//! - [`http_date`]: HTTP dates.
//! - [`freshness`]: lifetime, age, and what a lookup may do with an entry.
//! - [`policy`]: what is cacheable and storable, the cache keys, and which
//!   routes are worth a lookup.
//! - [`conditional`]: conditional requests against a stored entry, and the
//!   headers a `304` updates.
//! - [`invalidation`]: the URLs a write invalidates, and when each was last
//!   invalidated in this isolate.
//! - [`entry`]: a stored entry's form: its key and fields on the way in,
//!   the lookup of a request's entry, its fields on the way out.

pub mod conditional;
pub mod directives;
pub mod entry;
pub mod freshness;
pub mod http_date;
pub mod invalidation;
pub mod policy;
