//! `HEDGE_ORIGINS`: the origins, each with a checked name and URL.

use serde::Deserialize;

use super::reader::Reader;

/// One configured origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// A short name for headers, logs and metrics.
    pub name: String,
    /// Scheme, host, port and optional path prefix, without a trailing slash.
    pub base_url: String,
    /// Failure domain (region, data centre); hedges prefer another zone.
    pub zone: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OriginSpec {
    name: String,
    url: String,
    zone: Option<String>,
}

// === impl Reader ===

impl Reader<'_> {
    pub(super) fn origins(&mut self) -> Vec<Origin> {
        const KEY: &str = "HEDGE_ORIGINS";
        let Some(raw) = self.raw(KEY) else {
            self.fail(
                KEY,
                "required: a JSON array like [{\"name\":\"a\",\"url\":\"https://a.example\"}]",
            );
            return Vec::new();
        };
        let specs: Vec<OriginSpec> = match serde_json::from_str(raw) {
            Ok(specs) => specs,
            Err(e) => {
                self.fail(
                    KEY,
                    format!("not a JSON array of {{name, url, zone?}}: {e}"),
                );
                return Vec::new();
            }
        };
        if specs.is_empty() {
            self.fail(KEY, "at least one origin is needed");
        }
        let mut origins: Vec<Origin> = Vec::new();
        for (i, spec) in specs.into_iter().enumerate() {
            let name = spec.name.trim().to_string();
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                self.fail(
                    KEY,
                    format!(
                        "origin {i}: name {:?} must be non-empty [A-Za-z0-9_-]",
                        spec.name
                    ),
                );
            }
            if origins.iter().any(|o| o.name == name) {
                self.fail(KEY, format!("origin {i}: duplicate name {name:?}"));
            }
            match normalize_base_url(&spec.url) {
                Ok(base_url) => origins.push(Origin {
                    name,
                    base_url,
                    zone: spec.zone.filter(|z| !z.trim().is_empty()),
                }),
                Err(reason) => self.fail(
                    KEY,
                    format!("origin {i} ({name}): url {:?} {reason}", spec.url),
                ),
            }
        }
        origins
    }
}

/// Checks an origin URL and strips a trailing slash. Only `http`/`https`, a
/// host, an optional port and path; no credentials, query or fragment.
fn normalize_base_url(url: &str) -> Result<String, &'static str> {
    let url = url.trim();
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or("must start with http:// or https://")?;
    let authority = rest.split('/').next().unwrap_or_default();
    let path = &rest[authority.len()..];
    if authority.contains('@') {
        return Err("must not carry credentials (user@host)");
    }
    if path.contains(['?', '#']) || authority.contains(['?', '#']) {
        return Err("must not have a query or fragment");
    }
    // A bracketed IPv6 literal keeps its colons; a port follows the last ']'.
    let host_end = authority.rfind(']').map_or(0, |i| i + 1);
    let (host, port) = match authority[host_end..].rfind(':') {
        Some(i) => (
            &authority[..host_end + i],
            Some(&authority[host_end + i + 1..]),
        ),
        None => (authority, None),
    };
    let host_ok = !host.is_empty()
        && (host.starts_with('[')
            || host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-'));
    if !host_ok {
        return Err("has no valid host");
    }
    if let Some(port) = port {
        if port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err("has an invalid port");
        }
    }
    Ok(url.trim_end_matches('/').to_string())
}
