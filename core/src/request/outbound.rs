//! What is sent to an origin: its URL and which client headers go with it.
//!
//! The outbound host always comes from configuration. The client contributes
//! only a path and a query, appended to the origin's base URL as text, so no
//! path (`//evil.example`, `@host`, `..`) can change the host.

use crate::header_list::HeaderList;

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

/// The header names a `Connection` header value lists (lower case); an
/// element that is not a token (`bad token`, `a/b`) is skipped.
pub fn connection_tokens(connection: Option<&str>) -> Vec<String> {
    connection
        .unwrap_or_default()
        .split(',')
        .map(|token| token.trim().to_ascii_lowercase())
        .filter(|token| is_token(token))
        .collect()
}

/// The fields of a message (`head`) that a proxy does not pass on (RFC 9110
/// section 7.6.1): the hop-by-hop ones and those its `Connection` names,
/// each once, as `head` names them.
pub fn hop_by_hop_fields(head: &HeaderList) -> Vec<&str> {
    let tokens = connection_tokens(head.get("connection").as_deref());
    let mut fields: Vec<&str> = (head.names())
        .filter(|&name| HOP_BY_HOP.contains(&name) || tokens.iter().any(|t| t == name))
        .collect();
    fields.dedup();
    fields
}

/// An RFC 9110 token (section 5.6.2): a valid header name or directive
/// name. Anything else in `Connection` names no header, and handing it to
/// `Headers.delete` would throw.
pub fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
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

/// The W3C trace context of a request: its trace id and flags. Each leg is
/// sent with its own span id under it, so the two legs of a hedged request
/// are sibling spans of the client's span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// 32 lowercase hex digits, not all zero.
    pub trace_id: String,
    /// 2 hex digits (`01`: sampled).
    pub flags: String,
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Parses a `traceparent` header (W3C Trace Context level 1). Anything
/// invalid is `None`: the spec says to start a new trace then.
pub fn parse_traceparent(value: Option<&str>) -> Option<TraceContext> {
    let value = value?.trim();
    let mut parts = value.split('-');
    let (version, trace_id, parent_id, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let valid = is_hex(version, 2)
        && version != "ff"
        // Version 00 has exactly four fields; later versions may add more.
        && (version != "00" || parts.next().is_none())
        && is_hex(trace_id, 32)
        && trace_id.bytes().any(|b| b != b'0')
        && is_hex(parent_id, 16)
        && parent_id.bytes().any(|b| b != b'0')
        && is_hex(flags, 2);
    valid.then(|| TraceContext {
        trace_id: trace_id.to_string(),
        flags: flags.to_string(),
    })
}

/// The `traceparent` for one leg: the request's trace, this leg's span.
pub fn traceparent(trace: &TraceContext, span_id: &str) -> String {
    format!("00-{}-{span_id}-{}", trace.trace_id, trace.flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_fields_are_the_listed_ones_and_those_connection_names() {
        let head = HeaderList::from_pairs([
            ("connection", "close, X-Trace, bad token"),
            ("content-type", "text/plain"),
            ("keep-alive", "timeout=5"),
            ("x-trace", "1"),
            ("transfer-encoding", "chunked"),
        ]);
        assert_eq!(
            hop_by_hop_fields(&head),
            ["connection", "keep-alive", "x-trace", "transfer-encoding"]
        );
        assert!(hop_by_hop_fields(&HeaderList::from_pairs([("vary", "accept")])).is_empty());
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
        assert_eq!(
            connection_tokens(Some("close, bad token, a/b, \"q\", x-ok")),
            ["close", "x-ok"],
            "what is not a header name names none"
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

    #[test]
    fn valid_traceparent_keeps_trace_and_flags() {
        let t = parse_traceparent(Some(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ))
        .expect("valid");
        assert_eq!(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(
            traceparent(&t, "b7ad6b7169203331"),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
        );
        // A later version with an extra field is read by its first four.
        assert!(parse_traceparent(Some(
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"
        ))
        .is_some());
    }

    #[test]
    fn invalid_traceparent_starts_a_new_trace() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse_traceparent(Some(bad)), None, "{bad}");
        }
    }
}
