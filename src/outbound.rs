//! What is sent to an origin: its URL and the headers copied from the client.
//!
//! The outbound host always comes from configuration. The client contributes
//! only a path and a query, appended to the origin's base URL as text, so no
//! path (`//evil.example`, `@host`, `..`) can change the host.

/// Header names the Worker owns on the way to the origin; a client's copies are dropped.
pub const HEDGE_ATTEMPT_HEADER: &str = "x-hedge-attempt";
/// The request id header, propagated to both legs.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Hop-by-hop headers (RFC 9110 section 7.6.1): meaningful for one connection only.
const HOP_BY_HOP: &[&str] = &[
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

/// The client headers to forward: all but hop-by-hop ones, those the
/// `Connection` header names, and any `x-hedge-*` (those are the Worker's).
pub fn forwarded_request_headers(headers: &[(String, String)]) -> Vec<(String, String)> {
    without_hop_by_hop(headers, |name| {
        SET_BY_WORKER.contains(&name) || name.starts_with("x-hedge-")
    })
}

/// The origin's response headers to pass to the client: all but hop-by-hop ones.
pub fn forwarded_response_headers(headers: &[(String, String)]) -> Vec<(String, String)> {
    without_hop_by_hop(headers, |_| false)
}

/// `headers` less hop-by-hop ones, those `Connection` names, and those `also_drop`
/// (given a lower-case name) rejects.
fn without_hop_by_hop(
    headers: &[(String, String)],
    also_drop: impl Fn(&str) -> bool,
) -> Vec<(String, String)> {
    let connection_named: Vec<String> = headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, value)| value.split(','))
        .map(|token| token.trim().to_ascii_lowercase())
        .filter(|token| !token.is_empty())
        .collect();
    headers
        .iter()
        .filter(|(name, _)| {
            let name = name.to_ascii_lowercase();
            !HOP_BY_HOP.contains(&name.as_str())
                && !connection_named.contains(&name)
                && !also_drop(&name)
        })
        .cloned()
        .collect()
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

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

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
    fn hop_by_hop_and_hedge_headers_are_dropped() {
        let forwarded = forwarded_request_headers(&h(&[
            ("Connection", "keep-alive, X-Secret-Hop"),
            ("Keep-Alive", "timeout=5"),
            ("X-Secret-Hop", "1"),
            ("TE", "trailers"),
            ("Transfer-Encoding", "chunked"),
            ("Upgrade", "h2c"),
            ("Host", "evil.example"),
            ("X-Hedge-Attempt", "true"),
            ("x-hedge-anything", "1"),
            ("X-Request-Id", "abc"),
            ("Accept", "text/html"),
            ("Authorization", "Bearer t"),
        ]));
        assert_eq!(
            forwarded,
            h(&[("Accept", "text/html"), ("Authorization", "Bearer t")])
        );
    }

    #[test]
    fn response_hop_by_hop_headers_are_dropped() {
        let forwarded = forwarded_response_headers(&h(&[
            ("Transfer-Encoding", "chunked"),
            ("Connection", "close, X-Private"),
            ("X-Private", "1"),
            ("Content-Length", "10"),
            ("Set-Cookie", "a=1"),
            ("Set-Cookie", "b=2"),
        ]));
        assert_eq!(
            forwarded,
            h(&[
                ("Content-Length", "10"),
                ("Set-Cookie", "a=1"),
                ("Set-Cookie", "b=2")
            ])
        );
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
