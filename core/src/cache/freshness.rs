//! How long a stored response may be used, computed by this Worker rather
//! than left to the runtime's cache (RFC 9111 section 4.2, RFC 5861).
//!
//! When a response is stored, its freshness lifetime and corrected initial
//! age are worked out once and kept with it as [`StoredMeta`]; the runtime is
//! told only how long to *keep* the entry ([`StoredMeta::keep_secs`]: fresh
//! time plus the longest stale allowance), so it never drops an entry this
//! policy may still serve stale or revalidate, and never decides freshness
//! itself. At lookup, [`StoredMeta::verdict`] says fresh, usable while it is
//! revalidated in the background, or stale (and whether it may still rescue
//! an origin failure).

use super::directives::{delta, Directives};
use super::http_date;

/// A stored entry kept past its freshness for revalidation (it has an
/// `ETag` or `Last-Modified`) is kept at least this long, seconds.
pub const MIN_REVALIDATION_KEEP_SECS: f64 = 60.0;
/// ... and at most this long past its freshness.
pub const MAX_REVALIDATION_KEEP_SECS: f64 = 86_400.0;

/// What a stored response carries about its own freshness.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoredMeta {
    /// When its answer arrived, Unix seconds.
    pub response_time_s: f64,
    /// Its age on arrival (RFC 9111 section 4.2.3 `corrected_initial_age`).
    pub initial_age_s: f64,
    /// Its freshness lifetime.
    pub lifetime_s: f64,
    /// `stale-while-revalidate` allowance past the lifetime.
    pub stale_while_revalidate_s: f64,
    /// `stale-if-error` allowance past the lifetime.
    pub stale_if_error_s: f64,
    /// Never used stale (`must-revalidate`, `proxy-revalidate`, `s-maxage`).
    pub must_revalidate: bool,
    /// Has a validator (`ETag` or `Last-Modified`) to revalidate with.
    pub has_validator: bool,
}

/// The response headers freshness is computed from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FreshnessHeaders<'a> {
    /// `Date`.
    pub date: Option<&'a str>,
    /// `Age` (several lines joined with commas).
    pub age: Option<&'a str>,
    /// `Expires`.
    pub expires: Option<&'a str>,
    /// `ETag`.
    pub etag: Option<&'a str>,
    /// `Last-Modified`.
    pub last_modified: Option<&'a str>,
}

/// What a lookup may do with a stored response.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Fresh: serve it, with `Age` this many whole seconds.
    Fresh {
        /// The `Age` to send.
        age_s: u64,
    },
    /// Stale within `stale-while-revalidate`: serve it and refresh it in
    /// the background.
    StaleWhileRevalidate {
        /// The `Age` to send.
        age_s: u64,
    },
    /// Not usable as it is: ask the origin (conditionally, when it has a
    /// validator).
    Stale {
        /// The `Age` to send if it is served after all.
        age_s: u64,
        /// Within `stale-if-error`: it may answer instead of an origin failure.
        serve_on_error: bool,
    },
}

impl Verdict {
    /// The `Age` this verdict would send.
    pub fn age_s(self) -> u64 {
        match self {
            Verdict::Fresh { age_s }
            | Verdict::StaleWhileRevalidate { age_s }
            | Verdict::Stale { age_s, .. } => age_s,
        }
    }
}

/// The `Age` value a response carries: the first member of the field, a
/// non-negative integer; anything else is ignored (RFC 9111 section 5.1).
pub fn age_value(age: Option<&str>) -> Option<u64> {
    age.and_then(|a| a.split(',').next())
        .and_then(|a| delta(a.trim()))
}

// === impl StoredMeta ===

impl StoredMeta {
    /// The freshness of a response that was requested at `request_time_s` and
    /// arrived at `response_time_s`, under `directives` (already the targeted
    /// field where one decided); `None` when it gives no explicit freshness
    /// (no `s-maxage`, `max-age` or `Expires`: this cache does not guess).
    pub fn compute(
        directives: &Directives,
        headers: &FreshnessHeaders<'_>,
        request_time_s: f64,
        response_time_s: f64,
    ) -> Option<Self> {
        let date_s = headers
            .date
            .and_then(http_date::parse)
            .map(|d| d as f64)
            .unwrap_or(response_time_s);
        let apparent_age = (response_time_s - date_s).max(0.0);
        let response_delay = (response_time_s - request_time_s).max(0.0);
        let corrected_age = age_value(headers.age).unwrap_or(0) as f64 + response_delay;
        let initial_age_s = apparent_age.max(corrected_age);
        let lifetime_s = match (directives.s_maxage, directives.max_age, headers.expires) {
            (Some(s), _, _) | (None, Some(s), _) => s as f64,
            // An invalid Expires (or "0") is a time in the past.
            (None, None, Some(expires)) => {
                http_date::parse(expires).map_or(0.0, |e| (e as f64 - date_s).max(0.0))
            }
            (None, None, None) => return None,
        };
        let allowance = |v: Option<u64>| v.map_or(0.0, |s| s as f64);
        Some(StoredMeta {
            response_time_s,
            initial_age_s,
            lifetime_s,
            stale_while_revalidate_s: allowance(directives.stale_while_revalidate),
            stale_if_error_s: allowance(directives.stale_if_error),
            must_revalidate: directives.must_revalidate
                || directives.proxy_revalidate
                || directives.s_maxage.is_some(),
            has_validator: headers.etag.is_some() || headers.last_modified.is_some(),
        })
    }

    /// Its age at `now_s`, seconds.
    pub fn current_age_s(&self, now_s: f64) -> f64 {
        self.initial_age_s + (now_s - self.response_time_s).max(0.0)
    }

    /// How long the runtime should keep it from now on, whole seconds (0:
    /// not worth storing): its remaining fresh time plus the longest time it
    /// may still be used stale or revalidated.
    pub fn keep_secs(&self, now_s: f64) -> u64 {
        let fresh_left = self.lifetime_s - self.current_age_s(now_s);
        let revalidation = if self.has_validator {
            self.lifetime_s
                .clamp(MIN_REVALIDATION_KEEP_SECS, MAX_REVALIDATION_KEEP_SECS)
        } else {
            0.0
        };
        let stale = if self.must_revalidate {
            revalidation
        } else {
            revalidation
                .max(self.stale_while_revalidate_s)
                .max(self.stale_if_error_s)
        };
        (fresh_left.max(0.0) + stale).ceil().max(0.0) as u64
    }

    /// What a request with `request` directives may do with it at `now_s`.
    pub fn verdict(&self, request: &Directives, now_s: f64) -> Verdict {
        let age = self.current_age_s(now_s);
        let age_s = age.floor() as u64;
        let fresh_for_itself = age < self.lifetime_s;
        let fresh = fresh_for_itself
            && !request.no_cache
            && request.max_age.is_none_or(|max| age <= max as f64)
            && request
                .min_fresh
                .is_none_or(|min| self.lifetime_s - age >= min as f64);
        if fresh {
            return Verdict::Fresh { age_s };
        }
        let staleness = age - self.lifetime_s;
        // Fresh, but not fresh enough for this request: ask the origin, and
        // serve nothing older than it asked for.
        let may_go_stale = !fresh_for_itself && !self.must_revalidate && !request.no_cache;
        if may_go_stale && staleness < self.stale_while_revalidate_s {
            return Verdict::StaleWhileRevalidate { age_s };
        }
        Verdict::Stale {
            age_s,
            serve_on_error: may_go_stale && staleness < self.stale_if_error_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: f64 = 1_800_000_000.0;

    fn meta(cc: &str, headers: FreshnessHeaders<'_>) -> Option<StoredMeta> {
        StoredMeta::compute(
            &Directives::from_cache_control(Some(cc)),
            &headers,
            NOW,
            NOW,
        )
    }

    fn plain(cc: &str) -> StoredMeta {
        meta(cc, FreshnessHeaders::default()).unwrap()
    }

    const NO_REQ: Directives = Directives {
        max_age: None,
        s_maxage: None,
        stale_while_revalidate: None,
        stale_if_error: None,
        min_fresh: None,
        no_store: false,
        no_cache: false,
        private: false,
        public: false,
        must_revalidate: false,
        proxy_revalidate: false,
        only_if_cached: false,
    };

    #[test]
    fn a_hit_two_seconds_later_is_two_seconds_old() {
        let m = plain("max-age=60");
        assert_eq!(m.verdict(&NO_REQ, NOW + 2.4), Verdict::Fresh { age_s: 2 });
        assert!(matches!(
            m.verdict(&NO_REQ, NOW + 60.0),
            Verdict::Stale { .. }
        ));
    }

    #[test]
    fn the_origin_age_counts_and_bad_ages_are_ignored() {
        let aged = |age| {
            meta(
                "max-age=60",
                FreshnessHeaders {
                    age: Some(age),
                    ..Default::default()
                },
            )
        };
        assert_eq!(
            aged("50").unwrap().verdict(&NO_REQ, NOW + 2.0),
            Verdict::Fresh { age_s: 52 }
        );
        assert!(matches!(
            aged("7200").unwrap().verdict(&NO_REQ, NOW),
            Verdict::Stale { .. }
        ));
        assert!(matches!(
            aged("2147483648").unwrap().verdict(&NO_REQ, NOW),
            Verdict::Stale { .. }
        ));
        for bad in ["7200.0", "-7200", "old", "old, 0"] {
            assert_eq!(
                aged(bad).unwrap().verdict(&NO_REQ, NOW),
                Verdict::Fresh { age_s: 0 },
                "{bad}"
            );
        }
        assert!(matches!(
            aged("7200, 0").unwrap().verdict(&NO_REQ, NOW),
            Verdict::Stale { .. }
        ));
    }

    #[test]
    fn s_maxage_wins_over_max_age_and_forbids_stale_use() {
        let m = plain("max-age=3600, s-maxage=1, stale-if-error=60");
        assert_eq!(m.lifetime_s, 1.0);
        assert_eq!(
            m.verdict(&NO_REQ, NOW + 2.0),
            Verdict::Stale {
                age_s: 2,
                serve_on_error: false
            }
        );
    }

    #[test]
    fn expires_gives_freshness_relative_to_date() {
        let headers = FreshnessHeaders {
            date: Some("Fri, 15 Jan 2027 08:00:00 GMT"),
            expires: Some("Fri, 15 Jan 2027 08:01:40 GMT"),
            ..Default::default()
        };
        assert_eq!(meta("public", headers).unwrap().lifetime_s, 100.0);
        for bad in ["0", "Fri, 15 Jan 27 08:01:40 GMT"] {
            let m = meta(
                "",
                FreshnessHeaders {
                    expires: Some(bad),
                    ..headers
                },
            )
            .unwrap();
            assert_eq!(m.lifetime_s, 0.0, "{bad}");
        }
        assert_eq!(
            meta("public", FreshnessHeaders::default()),
            None,
            "no explicit freshness"
        );
    }

    #[test]
    fn stale_if_error_is_only_for_errors_and_swr_only_in_its_window() {
        let m = plain("max-age=1, stale-if-error=60");
        assert_eq!(
            m.verdict(&NO_REQ, NOW + 2.0),
            Verdict::Stale {
                age_s: 2,
                serve_on_error: true
            }
        );
        assert_eq!(
            m.verdict(&NO_REQ, NOW + 62.0),
            Verdict::Stale {
                age_s: 62,
                serve_on_error: false
            }
        );
        let m = plain("max-age=1, stale-while-revalidate=10");
        assert_eq!(
            m.verdict(&NO_REQ, NOW + 2.0),
            Verdict::StaleWhileRevalidate { age_s: 2 }
        );
        assert!(matches!(
            m.verdict(&NO_REQ, NOW + 12.0),
            Verdict::Stale { .. }
        ));
        let m = plain("max-age=1, stale-while-revalidate=10, must-revalidate");
        assert!(matches!(
            m.verdict(&NO_REQ, NOW + 2.0),
            Verdict::Stale {
                serve_on_error: false,
                ..
            }
        ));
    }

    #[test]
    fn the_request_can_ask_for_something_fresher() {
        let m = plain("max-age=60");
        let req = |v| Directives::from_cache_control(Some(v));
        assert!(matches!(
            m.verdict(&req("max-age=1"), NOW + 5.0),
            Verdict::Stale { .. }
        ));
        assert!(matches!(
            m.verdict(&req("min-fresh=58"), NOW + 5.0),
            Verdict::Stale { .. }
        ));
        assert!(matches!(
            m.verdict(&req("no-cache"), NOW),
            Verdict::Stale { .. }
        ));
        assert!(matches!(
            m.verdict(&req("max-age=10"), NOW + 5.0),
            Verdict::Fresh { .. }
        ));
    }

    #[test]
    fn the_runtime_keeps_an_entry_as_long_as_it_may_be_used() {
        assert_eq!(plain("max-age=60").keep_secs(NOW), 60);
        assert_eq!(plain("max-age=1, stale-if-error=60").keep_secs(NOW), 61);
        assert_eq!(plain("max-age=0").keep_secs(NOW), 0);
        let validated = meta(
            "max-age=1",
            FreshnessHeaders {
                etag: Some("\"x\""),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(validated.keep_secs(NOW), 61);
    }
}
