//! What is sent to an origin: its URL and which client headers go with it.
//!
//! The outbound host always comes from configuration. The client contributes
//! only a path and a query, appended to the origin's base URL as text, so no
//! path (`//evil.example`, `@host`, `..`) can change the host.

/// Header names the Worker owns on the way to the origin; a client's copies are dropped.
pub const HEDGE_ATTEMPT_HEADER: &str = "x-hedge-attempt";
/// The request id header, propagated to both legs.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Hop-by-hop headers (RFC 9110 section 7.6.1): meaningful for one connection only.
pub const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Request headers the runtime or the Worker sets itself.
const SET_BY_WORKER: &[&str] = &["host", "content-length", REQUEST_ID_HEADER];

/// The origin URL for a client request: `base` (scheme, host, port and an
/// optional path prefix, without a trailing slash) + `path` + `?query`.
pub fn upstream_url(base: &str, path: &str, query: Option<&str>) -> String {
    let mut url = String::with_capacity(base.len() + path.len() + 1);
    url.push_str(base.trim_end_matches('/'));
    if !path.starts_with('/') {
        url.push('/');
    }
    url.push_str(path);
    if let Some(q) = query {
        url.push('?');
        url.push_str(q);
    }
    url
}

/// The path and query of an absolute URL as the runtime hands it over
/// (`scheme://authority/path?query#fragment`); the fragment is dropped.
/// Anything without a scheme and authority is `None`.
pub fn path_and_query(url: &str) -> Option<(&str, Option<&str>)> {
    let after_scheme = &url[url.find("://")? + 3..];
    let rest = match after_scheme.find('/') {
        Some(i) => &after_scheme[i..],
        None => "/",
    };
    let rest = rest.split('#').next().unwrap_or(rest);
    Some(match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    })
}

/// The header names a `Connection` header value lists (lower case).
pub fn connection_tokens(connection: Option<&str>) -> Vec<String> {
    connection
        .unwrap_or_default()
        .split(',')
        .map(|token| token.trim().to_ascii_lowercase())
        .filter(|token| !token.is_empty())
        .collect()
}

/// Whether a client request header stays behind: hop-by-hop ones, those the
/// `Connection` header names, ones the Worker sets itself, and any
/// `x-hedge-*` (those belong to the Worker). `name` is lower case.
pub fn is_dropped_request_header(name: &str, connection_tokens: &[String]) -> bool {
    HOP_BY_HOP.contains(&name)
        || SET_BY_WORKER.contains(&name)
        || name.starts_with("x-hedge-")
        || connection_tokens.iter().any(|t| t == name)
}

/// The client's request id if it is a sane token (1-128 of `A-Za-z0-9._:-`), else `None`.
pub fn valid_request_id(value: Option<&str>) -> Option<String> {
    let v = value?.trim();
    let ok = !v.is_empty()
        && v.len() <= 128
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    ok.then(|| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_comes_from_the_base_url_whatever_the_path() {
        let base = "http://127.0.0.1:8080";
        for path in [
            "//evil.example/x",
            "/@evil.example",
            "/%2e%2e/evil",
            "/../x",
        ] {
            let url = upstream_url(base, path, None);
            assert!(url.starts_with("http://127.0.0.1:8080/"), "{url}");
        }
    }

    #[test]
    fn base_prefix_path_and_query_are_joined() {
        assert_eq!(
            upstream_url("https://o.example/v1/", "/items", Some("a=1&b=2")),
            "https://o.example/v1/items?a=1&b=2"
        );
        assert_eq!(
            upstream_url("https://o.example", "", None),
            "https://o.example/"
        );
    }

    #[test]
    fn path_and_query_come_from_the_absolute_url() {
        assert_eq!(
            path_and_query("https://edge.example/a/b?x=1&y=2#frag"),
            Some(("/a/b", Some("x=1&y=2")))
        );
        assert_eq!(path_and_query("http://edge.example"), Some(("/", None)));
        assert_eq!(
            path_and_query("http://h//evil.example/x"),
            Some(("//evil.example/x", None))
        );
        assert_eq!(path_and_query("not a url"), None);
    }

    #[test]
    fn hop_by_hop_and_hedge_headers_are_dropped() {
        let tokens = connection_tokens(Some("keep-alive, X-Secret-Hop"));
        for name in [
            "connection",
            "keep-alive",
            "x-secret-hop",
            "te",
            "transfer-encoding",
            "upgrade",
            "host",
            "content-length",
            "x-hedge-attempt",
            "x-hedge-anything",
            "x-request-id",
            "proxy-authorization",
        ] {
            assert!(is_dropped_request_header(name, &tokens), "{name}");
        }
        for name in [
            "accept",
            "authorization",
            "cookie",
            "x-hedge",
            "idempotency-key",
        ] {
            assert!(!is_dropped_request_header(name, &tokens), "{name}");
        }
    }

    #[test]
    fn connection_tokens_are_lower_case_and_trimmed() {
        assert_eq!(
            connection_tokens(Some(" Close ,X-A,, ")),
            vec!["close", "x-a"]
        );
        assert!(connection_tokens(None).is_empty());
    }

    #[test]
    fn request_ids_are_validated() {
        assert_eq!(
            valid_request_id(Some("abc-123_X.y:z")),
            Some("abc-123_X.y:z".into())
        );
        assert_eq!(valid_request_id(Some("")), None);
        assert_eq!(valid_request_id(Some("has space")), None);
        assert_eq!(valid_request_id(Some("x\r\ninjected: 1")), None);
        assert_eq!(valid_request_id(Some(&"a".repeat(129))), None);
        assert_eq!(valid_request_id(None), None);
    }
}
