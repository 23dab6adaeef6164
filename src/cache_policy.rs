//! Which requests may be answered from the edge cache, and which responses
//! may be stored in it.
//!
//! Conservative on purpose: a shared cache that serves one user's response to
//! another is a correctness bug, a miss is only a cost. So only `GET` without
//! credentials (`Authorization`, `Cookie`) or a client `no-cache`/`no-store`,
//! and only `200` responses that say they are shared-cacheable (`public`,
//! `max-age` or `s-maxage` above zero) and set no cookie and do not `Vary: *`.
//!
//! A cache lookup is not free (it is I/O on every request), and most API
//! routes never produce a storable response. [`CacheRoutes`] learns which
//! route keys do: those are always looked up, the rest only one request in
//! `probe_every`, which still finds entries other isolates stored.

use std::collections::HashSet;

/// Most route keys remembered as cacheable per isolate.
pub const MAX_CACHEABLE_ROUTES: usize = 1_024;

/// Which route keys have produced storable responses, and when to look up.
#[derive(Debug)]
pub struct CacheRoutes {
    known: HashSet<String>,
    probe_every: u64,
    unknown_seen: u64,
}

// === impl CacheRoutes ===

impl CacheRoutes {
    /// Nothing learned yet; unknown routes are looked up one time in `probe_every`.
    pub fn new(probe_every: u64) -> Self {
        Self {
            known: HashSet::new(),
            probe_every: probe_every.max(1),
            unknown_seen: 0,
        }
    }

    /// Whether a cacheable request on `route` should look in the cache.
    pub fn should_lookup(&mut self, route: &str) -> bool {
        if self.known.contains(route) {
            return true;
        }
        self.unknown_seen += 1;
        self.unknown_seen % self.probe_every == 1 || self.probe_every == 1
    }

    /// Number of routes remembered as cacheable.
    pub fn known_count(&self) -> usize {
        self.known.len()
    }

    /// `route` produced a storable response or a hit.
    pub fn learn(&mut self, route: &str) {
        if self.known.len() < MAX_CACHEABLE_ROUTES {
            self.known.insert(route.to_string());
        }
    }
}

/// What the request says, for [`request_cacheable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheRequestFacts<'a> {
    /// The request method.
    pub method: &'a str,
    /// Whether it carries `Authorization` or `Cookie`.
    pub has_credentials: bool,
    /// The request's `Cache-Control`, if any.
    pub cache_control: Option<&'a str>,
    /// The request's `Pragma`, if any (`no-cache` from HTTP/1.0 clients).
    pub pragma: Option<&'a str>,
}

/// What the response says, for [`response_storable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheResponseFacts<'a> {
    /// The status code.
    pub status: u16,
    /// The response's `Cache-Control`, if any.
    pub cache_control: Option<&'a str>,
    /// Whether it sets a cookie.
    pub sets_cookie: bool,
    /// The response's `Vary`, if any.
    pub vary: Option<&'a str>,
}

/// Whether the request may be served from, and fill, the cache.
pub fn request_cacheable(facts: &CacheRequestFacts<'_>) -> bool {
    facts.method.eq_ignore_ascii_case("GET")
        && !facts.has_credentials
        && !has_directive(facts.cache_control, "no-cache")
        && !has_directive(facts.cache_control, "no-store")
        && !has_directive(facts.pragma, "no-cache")
}

/// Whether the response may be stored for other clients.
pub fn response_storable(facts: &CacheResponseFacts<'_>) -> bool {
    if facts.status != 200 || facts.sets_cookie {
        return false;
    }
    if facts
        .vary
        .is_some_and(|v| v.split(',').any(|t| t.trim() == "*"))
    {
        return false;
    }
    let cc = facts.cache_control;
    if ["private", "no-store", "no-cache"]
        .iter()
        .any(|d| has_directive(cc, d))
    {
        return false;
    }
    let positive = |name| {
        directive_value(cc, name)
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|s| s > 0)
    };
    has_directive(cc, "public") || positive("max-age") || positive("s-maxage")
}

fn directives(header: Option<&str>) -> impl Iterator<Item = (String, Option<String>)> + '_ {
    header.unwrap_or_default().split(',').filter_map(|part| {
        let part = part.trim();
        if part.is_empty() {
            return None;
        }
        let (name, value) = match part.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().trim_matches('"').to_string())),
            None => (part, None),
        };
        Some((name.to_ascii_lowercase(), value))
    })
}

fn has_directive(header: Option<&str>, name: &str) -> bool {
    directives(header).any(|(n, _)| n == name)
}

fn directive_value(header: Option<&str>, name: &str) -> Option<String> {
    directives(header)
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_routes_are_probed_and_known_ones_always_looked_up() {
        let mut routes = CacheRoutes::new(4);
        let probes: Vec<bool> = (0..8).map(|_| routes.should_lookup("/api")).collect();
        assert_eq!(
            probes,
            [true, false, false, false, true, false, false, false]
        );
        routes.learn("/static");
        assert!((0..10).all(|_| routes.should_lookup("/static")));
    }

    #[test]
    fn remembered_routes_are_bounded() {
        let mut routes = CacheRoutes::new(1_000_000);
        for i in 0..(MAX_CACHEABLE_ROUTES + 100) {
            routes.learn(&format!("/r{i}"));
        }
        assert!(routes.should_lookup("/r0"));
        routes.should_lookup("/warm-up-the-counter");
        assert!(!routes.should_lookup(&format!("/r{}", MAX_CACHEABLE_ROUTES + 50)));
    }

    fn req(
        method: &'static str,
        cache_control: Option<&'static str>,
    ) -> CacheRequestFacts<'static> {
        CacheRequestFacts {
            method,
            has_credentials: false,
            cache_control,
            pragma: None,
        }
    }

    fn resp(status: u16, cache_control: Option<&'static str>) -> CacheResponseFacts<'static> {
        CacheResponseFacts {
            status,
            cache_control,
            sets_cookie: false,
            vary: None,
        }
    }

    #[test]
    fn plain_gets_are_cacheable() {
        assert!(request_cacheable(&req("GET", None)));
        assert!(request_cacheable(&req("GET", Some("max-age=0"))));
    }

    #[test]
    fn other_methods_credentials_and_no_cache_bypass_the_cache() {
        assert!(!request_cacheable(&req("HEAD", None)));
        assert!(!request_cacheable(&req("POST", None)));
        assert!(!request_cacheable(&req("GET", Some("No-Cache"))));
        assert!(!request_cacheable(&req("GET", Some("max-age=5, no-store"))));
        let with_credentials = CacheRequestFacts {
            has_credentials: true,
            ..req("GET", None)
        };
        assert!(!request_cacheable(&with_credentials));
        let pragma = CacheRequestFacts {
            pragma: Some("no-cache"),
            ..req("GET", None)
        };
        assert!(!request_cacheable(&pragma));
    }

    #[test]
    fn shared_cacheable_200s_are_stored() {
        assert!(response_storable(&resp(200, Some("public, max-age=60"))));
        assert!(response_storable(&resp(200, Some("s-maxage=30"))));
        assert!(response_storable(&resp(200, Some("max-age=\"10\""))));
    }

    #[test]
    fn private_uncacheable_or_personal_responses_are_not_stored() {
        for cc in [
            None,
            Some("max-age=0"),
            Some("private, max-age=60"),
            Some("no-store"),
            Some("no-cache, max-age=60"),
        ] {
            assert!(!response_storable(&resp(200, cc)), "{cc:?}");
        }
        assert!(!response_storable(&resp(404, Some("max-age=60"))));
        let cookie = CacheResponseFacts {
            sets_cookie: true,
            ..resp(200, Some("max-age=60"))
        };
        assert!(!response_storable(&cookie));
        let vary_all = CacheResponseFacts {
            vary: Some("Accept, *"),
            ..resp(200, Some("max-age=60"))
        };
        assert!(!response_storable(&vary_all));
    }
}
