//! Maps a request path to a route key: the unit latency is tracked by.
//!
//! Paths are unbounded (ids, hashes, query-like segments), so a key is never
//! the raw path. Outside the routes an operator names (`HEDGE_ROUTES`, whose
//! names are their keys) it is the first few path segments, cut to a fixed
//! length. The estimator still caps
//! how many keys it tracks; this only keeps each key meaningful and short.

use std::borrow::Cow;

/// Longest route key kept, in bytes.
pub const MAX_ROUTE_KEY_BYTES: usize = 64;

/// Settings for [`route_key`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouteKeyParams {
    /// How many leading path segments form the key.
    pub segments: usize,
}

/// `path` as routes are matched on it: what an origin's router would most
/// likely see, so that no spelling of a path escapes its route's policy.
/// Percent-encoded unreserved characters (RFC 3986 section 2.3: `%70` is
/// `p`) are decoded, runs of `/` are one, and ASCII letters are lower case
/// (routes match without regard to case: a `PUT /PAY/x` meets the `/pay`
/// route's rules whether the origin's router folds case or not). Reserved
/// characters stay encoded (`%2F` is not a separator). Borrowed, with no
/// allocation, when there is nothing to change. Only matching uses it: the
/// origin is sent the path as the client spelled it.
pub fn match_path(path: &str) -> Cow<'_, str> {
    let plain = !path.bytes().any(|b| b == b'%' || b.is_ascii_uppercase()) && !path.contains("//");
    if plain {
        return Cow::Borrowed(path);
    }
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while i < bytes.len() {
        let mut c = bytes[i];
        let mut step = 1;
        if c == b'%' {
            let hex = |k: usize| bytes.get(k).and_then(|h| (*h as char).to_digit(16));
            if let (Some(hi), Some(lo)) = (hex(i + 1), hex(i + 2)) {
                let decoded = (hi * 16 + lo) as u8;
                let unreserved = decoded.is_ascii_alphanumeric() || b"-._~".contains(&decoded);
                step = 3;
                if unreserved {
                    c = decoded;
                } else {
                    // Kept encoded, with lower-case hex (`%2F` and `%2f` are one).
                    out.push('%');
                    out.push(char::from(bytes[i + 1].to_ascii_lowercase()));
                    out.push(char::from(bytes[i + 2].to_ascii_lowercase()));
                    i += step;
                    continue;
                }
            }
        }
        if c == b'/' && out.ends_with('/') {
            i += step;
            continue;
        }
        if c.is_ascii() {
            out.push(char::from(c.to_ascii_lowercase()));
        } else {
            // A non-ASCII byte (the runtime's URLs are ASCII, but a test or
            // another caller may pass any text): copied as it is.
            let end = (i + 1..=bytes.len())
                .find(|&e| path.is_char_boundary(e))
                .unwrap_or(bytes.len());
            out.push_str(&path[i..end]);
            step = end - i;
        }
        i += step;
    }
    Cow::Owned(out)
}

/// The route key for `path` (the path only, without the query), matched as
/// [`match_path`] spells it.
pub fn route_key(path: &str, params: &RouteKeyParams) -> String {
    let path = match_path(path);
    let mut key = String::new();
    for segment in path
        .split('/')
        .filter(|s| !s.is_empty())
        .take(params.segments)
    {
        key.push('/');
        key.push_str(segment);
    }
    if key.is_empty() {
        key.push('/');
    }
    truncate(&key)
}

fn truncate(key: &str) -> String {
    if key.len() <= MAX_ROUTE_KEY_BYTES {
        return key.to_string();
    }
    let mut end = MAX_ROUTE_KEY_BYTES;
    while !key.is_char_boundary(end) {
        end -= 1;
    }
    key[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(segments: usize) -> RouteKeyParams {
        RouteKeyParams { segments }
    }

    #[test]
    fn every_spelling_of_a_path_matches_as_one() {
        for spelling in [
            "/pay/x",
            "/%70ay/x",
            "/%70%61%79/x",
            "/PAY/x",
            "/Pay//x",
            "//pay/x",
        ] {
            assert_eq!(match_path(spelling), "/pay/x", "{spelling}");
        }
        assert_eq!(
            match_path("/a%2Fb"),
            "/a%2fb",
            "a reserved character stays encoded"
        );
        assert_eq!(
            match_path("/a%zz%4"),
            "/a%zz%4",
            "a broken escape stays as it is"
        );
        assert_eq!(match_path("/caf\u{e9}/X"), "/caf\u{e9}/x");
        assert!(matches!(match_path("/plain/path-1"), Cow::Borrowed(_)));
    }

    #[test]
    fn unmatched_paths_use_leading_segments() {
        let p = params(2);
        assert_eq!(route_key("/static/img/logo.png", &p), "/static/img");
        assert_eq!(route_key("/static", &p), "/static");
        assert_eq!(route_key("//x//y/z", &p), "/x/y");
    }

    #[test]
    fn root_and_zero_segments_map_to_slash() {
        assert_eq!(route_key("/", &params(1)), "/");
        assert_eq!(route_key("/anything/at/all", &params(0)), "/");
    }

    #[test]
    fn long_keys_are_cut_on_a_char_boundary() {
        let long = format!("/{}", "é".repeat(100));
        let key = route_key(&long, &params(1));
        assert!(key.len() <= MAX_ROUTE_KEY_BYTES);
        assert!(long.starts_with(&key));
    }
}
