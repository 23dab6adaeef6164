//! What a write invalidates (RFC 9111 section 4.4): a non-error answer to an
//! unsafe method invalidates the stored responses for the target URI and for
//! the `Location` and `Content-Location` URIs of the same origin.
//!
//! The Cache API can delete a URL but cannot stop a fetch that was already
//! under way when the write happened from storing its older answer after the
//! delete. [`Invalidations`] remembers when each URL was last invalidated in
//! this isolate, so such a store is dropped and a coalesced flight that began
//! before the write takes no new waiters.

use crate::capped_map::CappedMap;

/// Most URLs whose last invalidation an isolate remembers; past that, a
/// watermark covers every URL (a store older than it is dropped).
pub const MAX_REMEMBERED: usize = 10_000;
/// How long an invalidation is remembered: longer than any request may run
/// before its store starts (the `HEDGE_TIMEOUT_MS` ceiling is 600 s).
pub const REMEMBER_MS: f64 = 900_000.0;

/// Whether `method` is unsafe (anything but GET, HEAD, OPTIONS and TRACE).
pub fn is_unsafe(method: &str) -> bool {
    !["GET", "HEAD", "OPTIONS", "TRACE"]
        .iter()
        .any(|m| method.eq_ignore_ascii_case(m))
}

/// Whether an answer `status` to `method` invalidates: an unsafe method and a
/// non-error (2xx or 3xx) status.
pub fn invalidates(method: &str, status: u16) -> bool {
    is_unsafe(method) && (200..400).contains(&status)
}

/// `scheme://authority` of an absolute http(s) URL.
fn origin_of(url: &str) -> Option<&str> {
    let (scheme, rest) = url.split_once("://")?;
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
        return None;
    }
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(&url[..scheme.len() + 3 + authority_len])
}

/// The URL a `Location` or `Content-Location` value names, resolved against
/// `request_url`, when it is of the same origin (else `None`: a write must
/// not reach into another site's entries). The fragment is dropped.
pub fn same_origin_target(request_url: &str, reference: &str) -> Option<String> {
    let origin = origin_of(request_url)?;
    let reference = reference.trim();
    let reference = reference.split('#').next().unwrap_or_default();
    let resolved = if reference.contains("://") {
        reference.to_string()
    } else if let Some(rest) = reference.strip_prefix("//") {
        let scheme = &origin[..origin.find("://")?];
        format!("{scheme}://{rest}")
    } else if reference.starts_with('/') {
        format!("{origin}{reference}")
    } else if reference.is_empty() || reference.starts_with('?') {
        return None;
    } else {
        // Relative to the request path's directory.
        let path = &request_url[origin.len()..];
        let path = path.split(['?', '#']).next().unwrap_or_default();
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        let dir = if dir.is_empty() { "/" } else { dir };
        format!("{origin}{dir}{reference}")
    };
    let same = origin_of(&resolved).is_some_and(|o| o.eq_ignore_ascii_case(origin));
    (same && !resolved.contains(char::is_whitespace)).then_some(resolved)
}

/// When each URL was last invalidated in this isolate.
#[derive(Debug)]
pub struct Invalidations {
    recent: CappedMap<String, f64>,
    /// Every URL counts as invalidated at this time (set when the map was full).
    watermark_ms: f64,
}

// === impl Invalidations ===

impl Invalidations {
    /// Nothing invalidated yet.
    pub fn new() -> Self {
        Self {
            recent: CappedMap::new(MAX_REMEMBERED, REMEMBER_MS),
            watermark_ms: f64::NEG_INFINITY,
        }
    }

    /// `url` was invalidated at `now_ms`.
    pub fn record(&mut self, url: &str, now_ms: f64) {
        match self
            .recent
            .get_or_insert_with(url.to_string(), now_ms, || now_ms)
        {
            Some(at) => *at = now_ms,
            None => self.watermark_ms = now_ms,
        }
    }

    /// Whether `url` was invalidated at or after `since_ms` (a store of an
    /// answer requested at `since_ms` must then be dropped).
    pub fn since(&self, url: &str, since_ms: f64) -> bool {
        self.watermark_ms >= since_ms || self.recent.get(url).is_some_and(|&at| at >= since_ms)
    }
}

impl Default for Invalidations {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_non_error_answers_to_unsafe_methods_invalidate() {
        for m in ["POST", "PUT", "DELETE", "PATCH", "M-SEARCH", "post"] {
            assert!(invalidates(m, 200) && invalidates(m, 303), "{m}");
            assert!(!invalidates(m, 404) && !invalidates(m, 500), "{m}");
        }
        for m in ["GET", "HEAD", "OPTIONS", "TRACE"] {
            assert!(!invalidates(m, 200), "{m}");
        }
    }

    #[test]
    fn locations_of_the_same_origin_resolve_and_others_do_not() {
        let req = "https://edge.test/docs/a?x=1";
        let t = |r| same_origin_target(req, r);
        assert_eq!(t("/b").as_deref(), Some("https://edge.test/b"));
        assert_eq!(t("c#frag").as_deref(), Some("https://edge.test/docs/c"));
        assert_eq!(
            t("https://edge.test/d").as_deref(),
            Some("https://edge.test/d")
        );
        assert_eq!(t("//edge.test/e").as_deref(), Some("https://edge.test/e"));
        assert_eq!(t("https://other.test/d"), None);
        assert_eq!(t("//other.test/e"), None);
        assert_eq!(
            t("http://edge.test/d"),
            None,
            "another scheme is another origin"
        );
        assert_eq!(t("https://edge.test.evil/d"), None);
        assert_eq!(t(""), None);
    }

    #[test]
    fn a_store_begun_before_an_invalidation_is_refused() {
        let mut inv = Invalidations::new();
        assert!(!inv.since("u", 0.0));
        inv.record("u", 100.0);
        assert!(inv.since("u", 50.0), "requested before the write");
        assert!(inv.since("u", 100.0));
        assert!(!inv.since("u", 101.0), "requested after it");
        assert!(!inv.since("v", 50.0));
    }

    #[test]
    fn a_full_table_falls_back_to_a_watermark_for_every_url() {
        let mut inv = Invalidations::new();
        for i in 0..MAX_REMEMBERED {
            inv.record(&format!("u{i}"), 10.0);
        }
        inv.record("one-too-many", 20.0);
        assert!(inv.since("never-seen", 15.0), "covered by the watermark");
        assert!(!inv.since("never-seen", 21.0));
    }
}
