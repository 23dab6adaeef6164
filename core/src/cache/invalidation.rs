//! What a write invalidates (RFC 9111 section 4.4): a non-error answer to an
//! unsafe method invalidates the stored responses for the target URI and for
//! the `Location` and `Content-Location` URIs of the same origin.
//!
//! The Cache API can delete a URL but cannot stop a fetch that was already
//! under way when the write happened from storing its older answer after the
//! delete. [`Invalidations`] remembers when URLs were last invalidated in
//! this isolate, so such a store is dropped and a coalesced flight that began
//! before the write takes no new waiters.
//!
//! Any client can send writes, so the table holds no URL: it is a fixed
//! count-min table of times (two rows of [`SLOTS`], 64 KiB whatever the
//! traffic), indexed by a hash keyed with the isolate's seed. A URL reads as
//! invalidated since `t` only when both of its slots were written at or after
//! `t`; a flood of writes can make an unrelated store look invalidated (the
//! store is skipped, the answer still served), never make one look safe, and
//! never stop the isolate's cache as a whole.

use std::hash::{Hash, Hasher};

/// Slots in each of the table's two rows.
pub const SLOTS: usize = 4_096;

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

/// The URLs a successful write to `url` invalidates (RFC 9111 section 4.4):
/// `url` itself and the same-origin `Location` and `Content-Location` its
/// answer names (`header` reads the answer's, by lowercase name), each once.
pub fn targets(url: &str, header: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut targets = vec![url.to_string()];
    for name in ["location", "content-location"] {
        let target = header(name).and_then(|value| same_origin_target(url, &value));
        if let Some(target) = target.filter(|t| !targets.contains(t)) {
            targets.push(target);
        }
    }
    targets
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

/// When URLs were last invalidated in this isolate (see the module docs).
#[derive(Debug)]
pub struct Invalidations {
    /// Two rows of [`SLOTS`] times (ms); a slot holds the latest write of
    /// any URL that hashes to it.
    rows: Box<[f64]>,
    /// Keys the hash, so that no client can aim a flood at one URL's slots.
    seed: u64,
}

// === impl Invalidations ===

impl Invalidations {
    /// Nothing invalidated yet; `seed` keys the hash.
    pub fn new(seed: u64) -> Self {
        Self {
            rows: vec![f64::NEG_INFINITY; 2 * SLOTS].into_boxed_slice(),
            seed,
        }
    }

    /// The slot of `url` in each row (the second row follows the first).
    fn slots(&self, url: &str) -> [usize; 2] {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.seed.hash(&mut h);
        url.hash(&mut h);
        let x = h.finish();
        // Two halves of one 64-bit hash: independent enough for two rows.
        [(x as usize) % SLOTS, SLOTS + ((x >> 32) as usize) % SLOTS]
    }

    /// `url` was invalidated at `now_ms`.
    pub fn record(&mut self, url: &str, now_ms: f64) {
        for slot in self.slots(url) {
            if let Some(at) = self.rows.get_mut(slot) {
                *at = at.max(now_ms);
            }
        }
    }

    /// Whether `url` was invalidated at or after `since_ms` (a store of an
    /// answer requested at `since_ms` must then be dropped).
    pub fn since(&self, url: &str, since_ms: f64) -> bool {
        let at = |slot: usize| self.rows.get(slot).copied().unwrap_or(f64::INFINITY);
        let [a, b] = self.slots(url);
        at(a).min(at(b)) >= since_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_invalidates_its_url_and_the_same_origin_locations_it_names_once() {
        let header = |name: &str| match name {
            "location" => Some("/doc/new".to_string()),
            "content-location" => Some("http://other.test/doc".to_string()),
            _ => None,
        };
        assert_eq!(
            targets("https://e.test/doc?x=1", &header),
            ["https://e.test/doc?x=1", "https://e.test/doc/new"]
        );
        let itself = |name: &str| (name == "location").then(|| "/doc".to_string());
        assert_eq!(
            targets("https://e.test/doc", &itself),
            ["https://e.test/doc"]
        );
    }

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
        let mut inv = Invalidations::new(1);
        assert!(!inv.since("u", 0.0));
        inv.record("u", 100.0);
        assert!(inv.since("u", 50.0), "requested before the write");
        assert!(inv.since("u", 100.0));
        assert!(!inv.since("u", 101.0), "requested after it");
        assert!(!inv.since("v", 50.0));
    }

    #[test]
    fn a_flood_of_writes_costs_no_memory_and_spares_other_urls() {
        let mut inv = Invalidations::new(7);
        let before = std::mem::size_of_val(&*inv.rows);
        // 100,000 distinct long URLs, all written at once.
        let long = "x".repeat(8_192);
        for i in 0..100_000 {
            inv.record(&format!("https://edge.test/{i}/{long}"), 10.0);
        }
        assert_eq!(std::mem::size_of_val(&*inv.rows), before, "fixed size");
        assert!(before <= 64 * 1024);
        // Every store requested after the flood is kept.
        assert!(!inv.since("https://edge.test/page", 11.0));
        // A URL written during a store's fetch is still caught.
        inv.record("https://edge.test/page", 20.0);
        assert!(inv.since("https://edge.test/page", 15.0));
        // A stream of writes (200 distinct URLs while a store is in flight)
        // spoils few unrelated stores (expected 0.2%): the old table's
        // watermark spoiled every one.
        let mut spoiled = 0;
        for i in 0..200 {
            inv.record(&format!("https://edge.test/w/{i}"), 30.0);
        }
        for i in 0..1_000 {
            spoiled += usize::from(inv.since(&format!("https://edge.test/r/{i}"), 25.0));
        }
        assert!(spoiled < 20, "{spoiled} of 1000 unrelated stores dropped");
    }
}
