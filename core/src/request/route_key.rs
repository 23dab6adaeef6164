//! Maps a request path to a route key: the unit latency is tracked by.
//!
//! Paths are unbounded (ids, hashes, query-like segments), so a key is never
//! the raw path. It is the longest configured prefix that matches, or else the
//! first few path segments, cut to a fixed length. The estimator still caps
//! how many keys it tracks; this only keeps each key meaningful and short.

/// Longest route key kept, in bytes.
pub const MAX_ROUTE_KEY_BYTES: usize = 64;

/// Settings for [`route_key`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouteKeyParams {
    /// Path prefixes that name a route (longest match wins), e.g. `/api/search`.
    pub prefixes: Vec<String>,
    /// Without a matching prefix: how many leading path segments form the key.
    pub segments: usize,
}

/// The route key for `path` (the path only, without the query).
pub fn route_key(path: &str, params: &RouteKeyParams) -> String {
    let best_prefix = params
        .prefixes
        .iter()
        .filter(|prefix| path.starts_with(prefix.as_str()))
        .max_by_key(|prefix| prefix.len());
    if let Some(prefix) = best_prefix {
        return truncate(prefix);
    }
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

    fn params(prefixes: &[&str], segments: usize) -> RouteKeyParams {
        RouteKeyParams {
            prefixes: prefixes.iter().map(|p| p.to_string()).collect(),
            segments,
        }
    }

    #[test]
    fn longest_configured_prefix_wins() {
        let p = params(&["/api/", "/api/search"], 1);
        assert_eq!(route_key("/api/search?q=1", &p), "/api/search");
        assert_eq!(route_key("/api/users/42", &p), "/api/");
    }

    #[test]
    fn unmatched_paths_use_leading_segments() {
        let p = params(&["/api/"], 2);
        assert_eq!(route_key("/static/img/logo.png", &p), "/static/img");
        assert_eq!(route_key("/static", &p), "/static");
        assert_eq!(route_key("//x//y/z", &p), "/x/y");
    }

    #[test]
    fn root_and_zero_segments_map_to_slash() {
        assert_eq!(route_key("/", &params(&[], 1)), "/");
        assert_eq!(route_key("/anything/at/all", &params(&[], 0)), "/");
    }

    #[test]
    fn long_keys_are_cut_on_a_char_boundary() {
        let long = format!("/{}", "é".repeat(100));
        let key = route_key(&long, &params(&[], 1));
        assert!(key.len() <= MAX_ROUTE_KEY_BYTES);
        assert!(long.starts_with(&key));
    }
}
