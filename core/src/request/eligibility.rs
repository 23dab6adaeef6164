//! Decides whether a request may be hedged at all.
//!
//! Hedging sends a request twice, so only requests that are safe to repeat
//! qualify: the configured idempotent methods (GET and HEAD by default), or,
//! only where the operator opted in (`HEDGE_IDEMPOTENCY_HEADER`, off by
//! default), any method when the client sends an idempotency key, and then
//! only if its body is small enough to hold for the second copy. A key only
//! makes a repeat safe where every origin checks it against one shared store,
//! which is why it is opt-in and why a keyed hedge never goes to the same
//! origin (see [`Eligibility::Hedgeable::peer_only`]). A body without a declared
//! length is read up to the cap by the Worker; if it turns out larger, the
//! request is sent once, streamed.

/// Settings for [`eligibility`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EligibilityParams {
    /// Methods hedged without further proof (upper case).
    pub methods: Vec<String>,
    /// A header whose presence makes any other method hedgeable (lower case);
    /// `None` disables that route.
    pub idempotency_header: Option<String>,
    /// Largest request body held in memory so it can be sent twice.
    pub max_body_bytes: u64,
}

/// What the Worker knows about a request when deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestFacts<'a> {
    /// The request method, as sent.
    pub method: &'a str,
    /// Whether the idempotency header is present with a non-empty value.
    pub has_idempotency_key: bool,
    /// The declared body length: `None` when absent (chunked, or no body).
    pub content_length: Option<u64>,
    /// Whether the request carries a body at all.
    pub has_body: bool,
    /// Whether it asks for a protocol upgrade (WebSocket): never repeatable.
    pub is_upgrade: bool,
    /// Whether it carries a method-override header ([`METHOD_OVERRIDE_HEADERS`]).
    pub method_override: bool,
}

/// Headers with which many frameworks (Rails, Laravel, Express's
/// method-override, ASP.NET, Spring's filter) let a request name another
/// method: a `GET` carrying `X-HTTP-Method-Override: DELETE` can run a
/// delete. Such a request is sent once as it is and kept out of the cache:
/// stripping the header instead would silently turn the client's delete
/// into a read, hiding what it asked for.
pub const METHOD_OVERRIDE_HEADERS: [&str; 3] = [
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// Whether a request may be hedged, and why not when it may not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eligibility {
    /// Safe to send twice. `buffer_body` says the body must be held for the copy.
    Hedgeable {
        /// Whether the request body must be read (up to the cap) for the second leg.
        buffer_body: bool,
        /// Its second leg must go to another origin, never the primary's own:
        /// a request hedgeable only through its idempotency key (one origin
        /// seeing the key twice at once may answer 409 or run it twice), and
        /// any method but GET and HEAD (a write is never re-sent to the origin
        /// that just failed it, not even after a fast 502/503/504).
        peer_only: bool,
    },
    /// Sent once, never hedged.
    NotHedgeable(NotHedgeableReason),
}

/// Why a request is not hedged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotHedgeableReason {
    /// The method is not idempotent and no idempotency key was sent.
    NotIdempotent,
    /// The body is larger than `max_body_bytes`, so it is not held for a copy.
    BodyTooLarge,
    /// A protocol upgrade cannot be repeated.
    Upgrade,
    /// The isolate already holds `HEDGE_TUNING.max_held_body_bytes` of bodies for replay.
    HeldBodiesFull,
    /// It names another method in a method-override header.
    MethodOverride,
}

impl NotHedgeableReason {
    /// A short name for headers and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            NotHedgeableReason::NotIdempotent => "not-idempotent",
            NotHedgeableReason::BodyTooLarge => "body-too-large",
            NotHedgeableReason::Upgrade => "upgrade",
            NotHedgeableReason::HeldBodiesFull => "held-bodies-full",
            NotHedgeableReason::MethodOverride => "method-override",
        }
    }
}

/// Decides whether `facts` describe a request that may be hedged.
pub fn eligibility(facts: &RequestFacts<'_>, params: &EligibilityParams) -> Eligibility {
    if facts.is_upgrade {
        return Eligibility::NotHedgeable(NotHedgeableReason::Upgrade);
    }
    if facts.method_override {
        return Eligibility::NotHedgeable(NotHedgeableReason::MethodOverride);
    }
    let method_ok = params
        .methods
        .iter()
        .any(|m| m.eq_ignore_ascii_case(facts.method));
    let keyed = params.idempotency_header.is_some() && facts.has_idempotency_key;
    if !method_ok && !keyed {
        return Eligibility::NotHedgeable(NotHedgeableReason::NotIdempotent);
    }
    let read_only =
        facts.method.eq_ignore_ascii_case("GET") || facts.method.eq_ignore_ascii_case("HEAD");
    let peer_only = !method_ok || !read_only;
    if !facts.has_body {
        return Eligibility::Hedgeable {
            buffer_body: false,
            peer_only,
        };
    }
    match facts.content_length {
        Some(len) if len > params.max_body_bytes => {
            Eligibility::NotHedgeable(NotHedgeableReason::BodyTooLarge)
        }
        _ => Eligibility::Hedgeable {
            buffer_body: true,
            peer_only,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> EligibilityParams {
        EligibilityParams {
            methods: vec!["GET".into(), "HEAD".into()],
            idempotency_header: Some("idempotency-key".into()),
            max_body_bytes: 1024,
        }
    }

    fn facts(method: &str) -> RequestFacts<'_> {
        RequestFacts {
            method,
            has_idempotency_key: false,
            content_length: None,
            has_body: false,
            is_upgrade: false,
            method_override: false,
        }
    }

    #[test]
    fn a_method_override_is_never_hedged() {
        let f = RequestFacts {
            method_override: true,
            ..facts("GET")
        };
        assert_eq!(
            eligibility(&f, &params()),
            Eligibility::NotHedgeable(NotHedgeableReason::MethodOverride)
        );
    }

    #[test]
    fn get_and_head_are_hedgeable() {
        for m in ["GET", "HEAD", "get"] {
            assert_eq!(
                eligibility(&facts(m), &params()),
                Eligibility::Hedgeable {
                    buffer_body: false,
                    peer_only: false
                }
            );
        }
    }

    #[test]
    fn post_without_a_key_is_never_hedged() {
        for m in ["POST", "PATCH", "PUT", "DELETE"] {
            assert_eq!(
                eligibility(&facts(m), &params()),
                Eligibility::NotHedgeable(NotHedgeableReason::NotIdempotent)
            );
        }
    }

    #[test]
    fn post_with_a_key_and_small_body_is_hedged_with_a_buffered_body() {
        let f = RequestFacts {
            has_idempotency_key: true,
            content_length: Some(100),
            has_body: true,
            ..facts("POST")
        };
        assert_eq!(
            eligibility(&f, &params()),
            Eligibility::Hedgeable {
                buffer_body: true,
                peer_only: true
            }
        );
    }

    #[test]
    fn a_key_does_nothing_when_the_header_is_disabled() {
        let f = RequestFacts {
            has_idempotency_key: true,
            ..facts("POST")
        };
        let p = EligibilityParams {
            idempotency_header: None,
            ..params()
        };
        assert_eq!(
            eligibility(&f, &p),
            Eligibility::NotHedgeable(NotHedgeableReason::NotIdempotent)
        );
    }

    #[test]
    fn a_declared_body_over_the_cap_is_not_replayed() {
        let f = RequestFacts {
            has_idempotency_key: true,
            content_length: Some(1025),
            has_body: true,
            ..facts("POST")
        };
        assert_eq!(
            eligibility(&f, &params()),
            Eligibility::NotHedgeable(NotHedgeableReason::BodyTooLarge)
        );
    }

    #[test]
    fn a_body_of_unknown_length_is_read_up_to_the_cap() {
        let f = RequestFacts {
            has_idempotency_key: true,
            content_length: None,
            has_body: true,
            ..facts("POST")
        };
        assert_eq!(
            eligibility(&f, &params()),
            Eligibility::Hedgeable {
                buffer_body: true,
                peer_only: true
            }
        );
    }

    #[test]
    fn writes_configured_as_idempotent_are_never_resent_to_their_own_origin() {
        let p = EligibilityParams {
            methods: vec!["GET".into(), "PUT".into(), "DELETE".into()],
            ..params()
        };
        for m in ["PUT", "DELETE"] {
            assert_eq!(
                eligibility(&facts(m), &p),
                Eligibility::Hedgeable {
                    buffer_body: false,
                    peer_only: true
                },
                "{m}"
            );
        }
    }

    #[test]
    fn upgrades_are_never_hedged() {
        let f = RequestFacts {
            is_upgrade: true,
            ..facts("GET")
        };
        assert_eq!(
            eligibility(&f, &params()),
            Eligibility::NotHedgeable(NotHedgeableReason::Upgrade)
        );
    }
}
