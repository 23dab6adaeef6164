//! A stored entry and conditional requests: a client's `If-None-Match` or
//! `If-Modified-Since` answered `304` from a fresh entry (RFC 9110 section
//! 13.1), and the headers a `304` from the origin updates in a stored entry
//! (RFC 9111 section 4.3.4).

use super::http_date;

/// Request headers that make a request conditional.
pub const CONDITIONAL_REQUEST_HEADERS: [&str; 5] = [
    "if-none-match",
    "if-modified-since",
    "if-match",
    "if-unmodified-since",
    "if-range",
];

/// Whether a request with fields `head` is conditional itself: a stale
/// entry is then not revalidated for it (the origin answers the client's
/// own question).
pub fn is_conditional(head: &crate::header_list::HeaderList) -> bool {
    CONDITIONAL_REQUEST_HEADERS
        .iter()
        .any(|name| head.has(name))
}

/// Headers of a stored entry that a `304` answer from the cache leaves out:
/// they describe the body it does not carry.
pub const NOT_MODIFIED_OMITS: [&str; 4] = [
    "content-length",
    "content-encoding",
    "content-range",
    "transfer-encoding",
];

/// Whether a fresh stored entry with `etag` / `last_modified` lets the cache
/// answer the client's conditional `GET` with `304`. `If-None-Match` (weak
/// comparison) takes precedence; `If-Modified-Since` is used only without
/// it, and only against a `Last-Modified`.
pub fn not_modified(
    if_none_match: Option<&str>,
    if_modified_since: Option<&str>,
    etag: Option<&str>,
    last_modified: Option<&str>,
) -> bool {
    if let Some(inm) = if_none_match {
        let Some(etag) = etag else {
            return false;
        };
        let opaque = |tag: &str| tag.trim().trim_start_matches("W/").to_string();
        let stored = opaque(etag);
        return inm
            .split(',')
            .any(|tag| tag.trim() == "*" || opaque(tag) == stored);
    }
    match (
        if_modified_since.and_then(http_date::parse),
        last_modified.and_then(http_date::parse),
    ) {
        (Some(since), Some(modified)) => modified <= since,
        _ => false,
    }
}

/// Whether a header of a `304` answer replaces the stored entry's: every
/// header but the ones describing the stored body or the connection, and no
/// cookie (a stored entry never sets one).
pub fn updated_by_304(name: &str) -> bool {
    !matches!(
        name,
        "content-length"
            | "content-encoding"
            | "content-range"
            | "transfer-encoding"
            | "set-cookie"
            | "set-cookie2"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_uses_weak_comparison_and_wins_over_if_modified_since() {
        let lm = Some("Fri, 15 Jan 2027 08:00:00 GMT");
        assert!(not_modified(Some("\"a\""), None, Some("\"a\""), None));
        assert!(not_modified(Some("W/\"a\""), None, Some("\"a\""), None));
        assert!(not_modified(
            Some("\"b\", \"a\""),
            None,
            Some("W/\"a\""),
            None
        ));
        assert!(not_modified(Some("*"), None, Some("\"a\""), None));
        assert!(!not_modified(Some("\"b\""), None, Some("\"a\""), None));
        assert!(!not_modified(Some("\"a\""), None, None, lm));
        assert!(
            !not_modified(Some("\"b\""), lm, Some("\"a\""), lm),
            "If-None-Match decides"
        );
    }

    #[test]
    fn if_modified_since_compares_dates() {
        let lm = Some("Fri, 15 Jan 2027 08:00:00 GMT");
        assert!(not_modified(None, lm, None, lm));
        assert!(not_modified(
            None,
            Some("Fri, 15 Jan 2027 09:00:00 GMT"),
            None,
            lm
        ));
        assert!(!not_modified(
            None,
            Some("Fri, 15 Jan 2027 07:00:00 GMT"),
            None,
            lm
        ));
        assert!(!not_modified(None, Some("yesterday"), None, lm));
        assert!(!not_modified(None, lm, None, None));
    }

    #[test]
    fn a_304_updates_all_but_body_framing_and_cookies() {
        assert!(updated_by_304("cache-control"));
        assert!(updated_by_304("x-test-header"));
        assert!(!updated_by_304("content-length"));
        assert!(!updated_by_304("set-cookie"));
    }
}
