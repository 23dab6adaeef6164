//! Which requests may be answered from the edge cache, which responses may
//! be stored in it, and under which keys.
//!
//! Conservative on purpose: a shared cache that serves one user's response to
//! another is a correctness bug, a miss is only a cost. So only `GET` without
//! credentials (`Authorization`, `Cookie`) or a client `no-cache`/`no-store`,
//! and only responses with a status in [`STORED_STATUSES`] and explicit
//! freshness (`s-maxage`, `max-age` or `Expires`, read from the targeted
//! `CDN-Cache-Control` fields first) that are not `private`, `no-store` or
//! `no-cache`, set no cookie, do not `Vary: *` and are not encoded.
//!
//! `Vary` (RFC 9111 4.1): a stored response may only be reused for a request
//! whose headers named by its `Vary` match. The Cache API is keyed by URL
//! alone, so a varying response is stored under a *variant key*
//! ([`variant_key`]) that spells out the exact values of those headers in the
//! storing request, and the plain URL holds only a *marker* naming them and
//! the entry's *generation*; a lookup that finds a marker builds the variant
//! key from its own request's headers. So a client only ever gets a response
//! stored for the same values of every header it varies on, and deleting the
//! marker (a write invalidating the URL) makes every variant unreachable: the
//! next store starts a new generation. `Vary: *`, more than
//! [`MAX_VARY_NAMES`] names, or a key longer than [`MAX_VARIANT_KEY_LEN`] is
//! not stored. Variant keys live under a `.invalid` host that no request may
//! name ([`is_reserved_host`]).
//!
//! A cache lookup is not free (it is I/O on every request), and most API
//! routes never produce a storable response. [`CacheRoutes`] learns which
//! route keys do: those are always looked up, the rest only one request in
//! `probe_every`, which still finds entries other isolates stored.

use std::collections::HashSet;

use super::directives::{response_directives, Directives};
use super::freshness::{FreshnessHeaders, StoredMeta};

/// Most route keys remembered as cacheable per isolate.
pub const MAX_CACHEABLE_ROUTES: usize = 1_024;

/// Which route keys have produced storable responses, and when to look up.
#[derive(Debug)]
pub struct CacheRoutes {
    known: HashSet<String>,
    /// Known routes whose latest answer was not storable: not coalesced, since
    /// a waiter there would wait for the leader only to fetch for itself.
    last_unstorable: HashSet<String>,
    probe_every: u64,
    unknown_seen: u64,
}

// === impl CacheRoutes ===

impl CacheRoutes {
    /// Nothing learned yet; unknown routes are looked up one time in `probe_every`.
    pub fn new(probe_every: u64) -> Self {
        Self {
            known: HashSet::new(),
            last_unstorable: HashSet::new(),
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
        self.last_unstorable.remove(route);
        // Checked first: every hit calls this, and inserting allocates.
        if !self.known.contains(route) && self.known.len() < MAX_CACHEABLE_ROUTES {
            self.known.insert(route.to_string());
        }
    }

    /// `route` answered with a response that may not be stored.
    pub fn learn_unstorable(&mut self, route: &str) {
        if self.known.contains(route) && self.last_unstorable.len() < MAX_CACHEABLE_ROUTES {
            self.last_unstorable.insert(route.to_string());
        }
    }

    /// Whether concurrent identical misses on `route` should wait for one
    /// fetch: only where the route's latest answer was storable. Elsewhere a
    /// waiter would be released when the leader's headers arrive and then
    /// fetch for itself, taking twice as long as alone.
    pub fn should_coalesce(&self, route: &str) -> bool {
        self.known.contains(route) && !self.last_unstorable.contains(route)
    }
}

/// Most header names a stored response may vary on.
pub const MAX_VARY_NAMES: usize = 8;

/// Longest variant key; a longer one (huge header values) is not stored.
pub const MAX_VARIANT_KEY_LEN: usize = 4_096;

/// Header on a marker entry (stored under the plain URL): the lower-case,
/// comma-separated header names the URL's response varies on.
pub const VARY_MARKER_HEADER: &str = "x-hedgehog-vary";

/// Header on a marker entry: the generation its variants are stored under.
pub const GENERATION_HEADER: &str = "x-hedgehog-generation";

/// Every header the Worker itself puts on a stored entry starts with this;
/// an origin's own headers of that name are never stored.
pub const INTERNAL_HEADER_PREFIX: &str = "x-hedgehog-";

/// Header on a stored entry: its [`EntryMeta`] as JSON.
pub const META_HEADER: &str = "x-hedgehog-meta";

/// The origin's headers that would let the runtime's own cache decide
/// freshness (it reads them on `put`): a stored entry keeps them in its
/// [`EntryMeta`] instead, and they are restored when it is served. `Age` is
/// not kept: it is folded into the entry's initial age and sent afresh.
pub const HIDDEN_FROM_RUNTIME: [&str; 6] = [
    "cache-control",
    "cdn-cache-control",
    "cloudflare-cdn-cache-control",
    "expires",
    "date",
    "pragma",
];

/// What a stored entry carries besides the origin's other headers, in one
/// header ([`META_HEADER`]): one read on the hit path instead of one per
/// hidden header.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryMeta {
    /// Its freshness.
    pub freshness: StoredMeta,
    /// The origin's headers of [`HIDDEN_FROM_RUNTIME`] it had, as sent.
    pub hidden: Vec<(String, String)>,
}

// === impl EntryMeta ===

impl EntryMeta {
    /// The value the origin sent for `name`, if it is a hidden header.
    pub fn hidden(&self, name: &str) -> Option<&str> {
        self.hidden
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// As the value of [`META_HEADER`]: `2`, then the times in whole
    /// milliseconds (arrival, initial age, lifetime, stale-while-revalidate,
    /// stale-if-error), the two flags, and each hidden header as
    /// `name:length:value`. Not JSON: this is read on every hit, and parsing
    /// JSON (its floats above all) cost about 3% of a hit's CPU in workerd.
    pub fn to_header(&self) -> String {
        let f = &self.freshness;
        let ms = |s: f64| (s * 1000.0).round().max(0.0) as u64;
        let flag = |b: bool| if b { '1' } else { '0' };
        let mut out = format!(
            "{META_FORMAT} {} {} {} {} {} {}{} ",
            ms(f.response_time_s),
            ms(f.initial_age_s),
            ms(f.lifetime_s),
            ms(f.stale_while_revalidate_s),
            ms(f.stale_if_error_s),
            flag(f.must_revalidate),
            flag(f.has_validator),
        );
        for (name, value) in &self.hidden {
            out.push_str(&format!("{name}:{}:{value}", value.len()));
        }
        out
    }

    /// From the value of [`META_HEADER`]; `None` for anything else (an
    /// entry stored by an older build is then a miss).
    pub fn from_header(value: &str) -> Option<Self> {
        let mut fields = value.splitn(8, ' ');
        if fields.next()? != META_FORMAT {
            return None;
        }
        let mut secs =
            || -> Option<f64> { Some(fields.next()?.parse::<u64>().ok()? as f64 / 1000.0) };
        let (t, a, l, w, e) = (secs()?, secs()?, secs()?, secs()?, secs()?);
        let flags = fields.next()?.as_bytes();
        let flag = |i: usize| match flags.get(i) {
            Some(b'0') => Some(false),
            Some(b'1') => Some(true),
            _ => None,
        };
        let (must_revalidate, has_validator) = (flag(0)?, flag(1)?);
        if flags.len() != 2 {
            return None;
        }
        let mut rest = fields.next().unwrap_or_default();
        let mut hidden = Vec::new();
        while !rest.is_empty() {
            let (name, after) = rest.split_once(':')?;
            let (len, after) = after.split_once(':')?;
            let len: usize = len.parse().ok()?;
            let value = after.get(..len)?;
            hidden.push((name.to_string(), value.to_string()));
            rest = &after[len..];
        }
        Some(EntryMeta {
            freshness: StoredMeta {
                response_time_s: t,
                initial_age_s: a,
                lifetime_s: l,
                stale_while_revalidate_s: w,
                stale_if_error_s: e,
                must_revalidate,
                has_validator,
            },
            hidden,
        })
    }
}

/// The first field of [`META_HEADER`]: its format.
const META_FORMAT: &str = "2";

/// What a response's `Vary` means for storing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VaryRule {
    /// No `Vary` (or an empty one): one entry under the plain URL.
    None,
    /// Stored under the variant key of these lower-case header names (sorted, unique).
    Headers(Vec<String>),
    /// `Vary: *`, too many names, or a malformed name: never stored.
    Unstorable,
}

/// Reads a `Vary` header value (or a marker's list of names).
pub fn vary_rule(vary: Option<&str>) -> VaryRule {
    let mut names: Vec<String> = Vec::new();
    for name in vary.unwrap_or_default().split(',').map(str::trim) {
        if name.is_empty() {
            continue;
        }
        let token = name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if name == "*" || !token {
            return VaryRule::Unstorable;
        }
        names.push(name.to_ascii_lowercase());
    }
    names.sort();
    names.dedup();
    match names.len() {
        0 => VaryRule::None,
        n if n > MAX_VARY_NAMES => VaryRule::Unstorable,
        _ => VaryRule::Headers(names),
    }
}

/// The cache key of the variant of `url` in `generation` selected by the
/// request headers `names` (as [`vary_rule`] gives them), or `None` when it
/// would be too long.
///
/// The key's host, `hedgehog-vary.invalid`, can never be a client's own URL:
/// requests to `.invalid` hosts are refused ([`is_reserved_host`]), so a
/// client cannot fetch or store a variant entry directly. Values are spelled out exactly (percent-encoded, no hash),
/// so two different values can never share an entry; an absent header and
/// an empty one differ too.
pub fn variant_key(
    url: &str,
    generation: &str,
    names: &[String],
    header: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let mut key = String::from("https://hedgehog-vary.invalid/v2?g=");
    percent_encode_into(&mut key, generation);
    key.push_str("&url=");
    percent_encode_into(&mut key, url);
    for name in names {
        key.push('&');
        key.push_str(name);
        match header(name) {
            Some(value) => {
                key.push('=');
                percent_encode_into(&mut key, &normalize_header_value(&value));
            }
            None => key.push_str("~absent"),
        }
        if key.len() > MAX_VARIANT_KEY_LEN {
            return None;
        }
    }
    Some(key)
}

/// Whitespace around list commas and at the ends does not change a header's
/// meaning: `gzip, br` and `gzip,br` are one variant.
fn normalize_header_value(value: &str) -> String {
    value
        .split(',')
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(",")
}

fn percent_encode_into(out: &mut String, text: &str) {
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
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

/// What the response says, for [`storable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheResponseFacts<'a> {
    /// The status code.
    pub status: u16,
    /// The response's `Cache-Control`, if any.
    pub cache_control: Option<&'a str>,
    /// Its `CDN-Cache-Control` (RFC 9213), if any.
    pub cdn_cache_control: Option<&'a str>,
    /// Its `Cloudflare-CDN-Cache-Control`, if any (takes precedence).
    pub cloudflare_cdn_cache_control: Option<&'a str>,
    /// Whether it sets a cookie.
    pub sets_cookie: bool,
    /// The response's `Content-Encoding`, if any.
    pub content_encoding: Option<&'a str>,
    /// The response's `Vary`, if any.
    pub vary: Option<&'a str>,
    /// The headers its freshness is computed from.
    pub freshness: FreshnessHeaders<'a>,
}

/// Statuses stored when the response says how long they stay fresh: the
/// heuristically cacheable ones of RFC 9110 section 15.1 and the temporary
/// redirects. Errors of the 5xx kind other than 501 are never stored: a
/// hedging proxy must not pin an origin's passing failure.
pub const STORED_STATUSES: [u16; 14] = [
    200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 501,
];

/// The request's cache directives when it may be served from, and fill,
/// the cache; `None` when it bypasses the cache: not a `GET`, credentials
/// (`Authorization`, `Cookie`), or a client `no-store` / `no-cache` /
/// `Pragma: no-cache`, which must reach the origin.
pub fn request_cacheable(facts: &CacheRequestFacts<'_>) -> Option<Directives> {
    let d = Directives::from_cache_control(facts.cache_control);
    let pragma_no_cache =
        facts.cache_control.is_none() && Directives::from_cache_control(facts.pragma).no_cache;
    let bypass = !facts.method.eq_ignore_ascii_case("GET")
        || facts.has_credentials
        || d.no_store
        || d.no_cache
        || pragma_no_cache;
    (!bypass).then_some(d)
}

/// The freshness of a response that may be stored for other clients, or
/// `None`: it was asked for at `request_time_s` and arrived at
/// `response_time_s` (Unix seconds).
pub fn storable(
    facts: &CacheResponseFacts<'_>,
    request_time_s: f64,
    response_time_s: f64,
) -> Option<StoredMeta> {
    let d = stored_directives(
        facts.status,
        facts.cache_control,
        facts.cdn_cache_control,
        facts.cloudflare_cdn_cache_control,
        facts.freshness.expires.is_some(),
    )?;
    if facts.sets_cookie {
        return None;
    }
    // An encoded body is not stored. The runtime negotiates encoding with the
    // client itself (a Worker sees every client's Accept-Encoding as
    // `br, gzip`, so it cannot key on it), and a stored encoded body came back
    // to an `identity` client as gzip bytes without a Content-Encoding
    // (workerd). A plain body is stored, and the runtime encodes it per client.
    let encoded = facts
        .content_encoding
        .map(str::trim)
        .is_some_and(|e| !e.is_empty() && !e.eq_ignore_ascii_case("identity"));
    if encoded || vary_rule(facts.vary) == VaryRule::Unstorable {
        return None;
    }
    let meta = StoredMeta::compute(&d, &facts.freshness, request_time_s, response_time_s)?;
    (meta.keep_secs(response_time_s) > 0).then_some(meta)
}

/// Whether a response with this status, these cache-control fields and
/// (or without) an `Expires` may still be storable: the refusals [`storable`]
/// makes from them alone. The Worker asks this before reading the
/// response's other headers (each read crosses into JavaScript).
pub fn may_be_stored(
    status: u16,
    cache_control: Option<&str>,
    cdn_cache_control: Option<&str>,
    cloudflare_cdn_cache_control: Option<&str>,
    has_expires: bool,
) -> bool {
    stored_directives(
        status,
        cache_control,
        cdn_cache_control,
        cloudflare_cdn_cache_control,
        has_expires,
    )
    .is_some()
}

/// The directives a storable response is judged by, or `None` when the
/// status, `no-store`, `private`, `no-cache` or the lack of any explicit
/// freshness already rules storing out.
fn stored_directives(
    status: u16,
    cache_control: Option<&str>,
    cdn_cache_control: Option<&str>,
    cloudflare_cdn_cache_control: Option<&str>,
    has_expires: bool,
) -> Option<Directives> {
    if !STORED_STATUSES.contains(&status) {
        return None;
    }
    let (d, _) = response_directives(
        cache_control,
        cdn_cache_control,
        cloudflare_cdn_cache_control,
    );
    let explicit = d.max_age.is_some() || d.s_maxage.is_some() || has_expires;
    (explicit && !(d.no_store || d.private || d.no_cache)).then_some(d)
}

/// Whether a request URL names a host in the Worker's own key namespace
/// (`.invalid`, which never resolves: RFC 6761): such a request is refused
/// before it reaches the cache or an origin.
pub fn is_reserved_host(url: &str) -> bool {
    let host = url_host(url);
    host == "invalid" || host.ends_with(".invalid")
}

/// The host a request URL names: lowercase, without port, credentials or a
/// trailing dot.
pub fn url_host(url: &str) -> String {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = after_scheme
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host.rsplit_once(':') {
        Some((h, port)) if !h.ends_with(']') && port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// The answer's freshness if the cache may keep it: requested at
/// `requested_ms`, answered at `answered_ms`. The cheap refusals come first:
/// each header read crosses into JavaScript, and most answers are not storable.
pub fn response_freshness(
    status: u16,
    header: &dyn Fn(&str) -> Option<String>,
    requested_ms: f64,
    answered_ms: f64,
) -> Option<(StoredMeta, u64)> {
    if !STORED_STATUSES.contains(&status) {
        return None;
    }
    let (cc, cdn, cf, expires) = (
        header("cache-control"),
        header("cdn-cache-control"),
        header("cloudflare-cdn-cache-control"),
        header("expires"),
    );
    if !may_be_stored(
        status,
        cc.as_deref(),
        cdn.as_deref(),
        cf.as_deref(),
        expires.is_some(),
    ) {
        return None;
    }
    let (encoding, vary) = (header("content-encoding"), header("vary"));
    let (date, age, etag, last_modified) = (
        header("date"),
        header("age"),
        header("etag"),
        header("last-modified"),
    );
    let facts = CacheResponseFacts {
        status,
        cache_control: cc.as_deref(),
        cdn_cache_control: cdn.as_deref(),
        cloudflare_cdn_cache_control: cf.as_deref(),
        sets_cookie: header("set-cookie").is_some(),
        content_encoding: encoding.as_deref(),
        vary: vary.as_deref(),
        freshness: FreshnessHeaders {
            date: date.as_deref(),
            age: age.as_deref(),
            expires: expires.as_deref(),
            etag: etag.as_deref(),
            last_modified: last_modified.as_deref(),
        },
    };
    let answered_s = answered_ms / 1000.0;
    let meta = storable(&facts, requested_ms / 1000.0, answered_s)?;
    Some((meta, meta.keep_secs(answered_s)))
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
            cdn_cache_control: None,
            cloudflare_cdn_cache_control: None,
            sets_cookie: false,
            content_encoding: None,
            vary: None,
            freshness: FreshnessHeaders::default(),
        }
    }

    fn response_storable(facts: &CacheResponseFacts<'_>) -> bool {
        storable(facts, 1e9, 1e9).is_some()
    }

    #[test]
    fn plain_gets_are_cacheable() {
        assert!(request_cacheable(&req("GET", None)).is_some());
        let max_age_0 = request_cacheable(&req("GET", Some("max-age=0")));
        assert_eq!(max_age_0.and_then(|d| d.max_age), Some(0));
    }

    #[test]
    fn other_methods_credentials_and_no_cache_bypass_the_cache() {
        let request_cacheable = |f: &CacheRequestFacts<'_>| request_cacheable(f).is_some();
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
        for status in [204, 301, 404, 410] {
            assert!(
                response_storable(&resp(status, Some("max-age=10"))),
                "{status}"
            );
        }
        let expires = CacheResponseFacts {
            freshness: FreshnessHeaders {
                date: Some("Fri, 15 Jan 2027 08:00:00 GMT"),
                expires: Some("Fri, 15 Jan 2027 09:00:00 GMT"),
                ..FreshnessHeaders::default()
            },
            ..resp(200, None)
        };
        assert!(response_storable(&expires), "Expires without max-age");
    }

    #[test]
    fn cdn_cache_control_decides_for_this_cache() {
        let cdn = |cc, cdn| CacheResponseFacts {
            cdn_cache_control: Some(cdn),
            ..resp(200, Some(cc))
        };
        assert!(!response_storable(&cdn("max-age=60", "private")));
        assert!(!response_storable(&cdn("max-age=60", "no-store")));
        assert!(response_storable(&cdn("no-store", "max-age=60")));
        assert!(
            !response_storable(&cdn("no-store", "max-age=\"60\"")),
            "invalid: ignored"
        );
        let cloudflare = CacheResponseFacts {
            cloudflare_cdn_cache_control: Some("no-store"),
            ..cdn("max-age=60", "max-age=60")
        };
        assert!(!response_storable(&cloudflare));
    }

    #[test]
    fn entry_meta_round_trips_through_its_header_with_any_header_bytes() {
        let meta = EntryMeta {
            freshness: storable(&resp(200, Some("max-age=60")), 1e9, 1e9).unwrap(),
            hidden: vec![
                ("cache-control".into(), "max-age=60, x=\"a:b,c 5:\"".into()),
                ("expires".into(), "caf\u{e9}\t0".into()),
            ],
        };
        let header = meta.to_header();
        assert!(header
            .chars()
            .all(|c| c != '\n' && c != '\r' && u32::from(c) <= 0xff));
        assert_eq!(EntryMeta::from_header(&header), Some(meta.clone()));
        assert_eq!(meta.hidden("expires"), Some("caf\u{e9}\t0"));
        for bad in [
            "{not json",
            "1 0 0 0 0 0 00 ",
            "2 0 0 0 0 0 02 ",
            "2 0 0 x 0 0 00 ",
            "2 0 0 0 0 0 00 date:99:x",
        ] {
            assert_eq!(EntryMeta::from_header(bad), None, "{bad}");
        }
    }

    #[test]
    fn reserved_hosts_are_recognised_however_spelled() {
        for url in [
            "https://hedgehog-vary.invalid/v2?g=1",
            "http://HEDGEHOG-VARY.INVALID./x",
            "https://a.invalid:8443/",
            "https://user@x.invalid/",
        ] {
            assert!(is_reserved_host(url), "{url}");
        }
        for url in [
            "https://example.com/x.invalid",
            "http://invalid.example:80/",
            "http://[::1]:80/",
        ] {
            assert!(!is_reserved_host(url), "{url}");
        }
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
        assert!(!response_storable(&resp(503, Some("max-age=60"))));
        assert!(!response_storable(&resp(206, Some("max-age=60"))));
        assert!(
            !response_storable(&resp(200, Some("public"))),
            "no explicit freshness"
        );
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
        for encoding in ["gzip", "br", " GZIP "] {
            let encoded = CacheResponseFacts {
                content_encoding: Some(encoding),
                ..resp(200, Some("max-age=60"))
            };
            assert!(!response_storable(&encoded), "{encoding}");
        }
        let identity = CacheResponseFacts {
            content_encoding: Some("identity"),
            ..resp(200, Some("max-age=60"))
        };
        assert!(response_storable(&identity));
    }

    #[test]
    fn vary_names_are_read_sorted_and_bounded() {
        assert_eq!(vary_rule(None), VaryRule::None);
        assert_eq!(vary_rule(Some(" , ")), VaryRule::None);
        assert_eq!(
            vary_rule(Some("Origin, Accept-Language,origin")),
            VaryRule::Headers(vec!["accept-language".into(), "origin".into()])
        );
        assert_eq!(vary_rule(Some("*")), VaryRule::Unstorable);
        assert_eq!(vary_rule(Some("bad name")), VaryRule::Unstorable);
        let many = (0..=MAX_VARY_NAMES)
            .map(|i| format!("x-h{i}"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(vary_rule(Some(&many)), VaryRule::Unstorable);
    }

    fn key_for(url: &str, names: &[&str], headers: &[(&str, &str)]) -> Option<String> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        variant_key(url, "g1", &names, |n| {
            headers
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn each_variant_gets_its_own_key() {
        let en = key_for(
            "https://e/x",
            &["accept-language"],
            &[("accept-language", "en")],
        );
        let fr = key_for(
            "https://e/x",
            &["accept-language"],
            &[("accept-language", "fr")],
        );
        let none = key_for("https://e/x", &["accept-language"], &[]);
        let empty = key_for(
            "https://e/x",
            &["accept-language"],
            &[("accept-language", "")],
        );
        let keys = [&en, &fr, &none, &empty];
        for (i, a) in keys.iter().enumerate() {
            assert!(a.is_some());
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        let other_url = key_for(
            "https://e/y",
            &["accept-language"],
            &[("accept-language", "en")],
        );
        assert_ne!(en, other_url);
    }

    #[test]
    fn a_value_cannot_forge_another_variant_or_url() {
        // A value carrying the key's own separators stays inside its field.
        let forged = key_for(
            "https://e/x",
            &["accept-language", "origin"],
            &[("accept-language", "en&origin=https://a"), ("origin", "b")],
        );
        let honest = key_for(
            "https://e/x",
            &["accept-language", "origin"],
            &[("accept-language", "en"), ("origin", "https://a")],
        );
        assert_ne!(forged, honest);
        assert!(forged.is_some_and(|k| k.starts_with("https://hedgehog-vary.invalid/")));
    }

    #[test]
    fn list_spacing_is_one_variant_and_huge_values_are_not_keyed() {
        assert_eq!(
            key_for(
                "u",
                &["accept-encoding"],
                &[("accept-encoding", "gzip, br")]
            ),
            key_for(
                "u",
                &["accept-encoding"],
                &[("accept-encoding", " gzip,br ")]
            )
        );
        let huge = "a".repeat(MAX_VARIANT_KEY_LEN);
        assert_eq!(key_for("u", &["origin"], &[("origin", &huge)]), None);
    }

    #[test]
    fn routes_whose_latest_answer_was_unstorable_are_not_coalesced() {
        let mut routes = CacheRoutes::new(64);
        assert!(!routes.should_coalesce("/r"), "unknown: not coalesced");
        routes.learn("/r");
        assert!(routes.should_coalesce("/r"));
        routes.learn_unstorable("/r");
        assert!(!routes.should_coalesce("/r"));
        assert!(
            routes.should_lookup("/r"),
            "still looked up: it was storable once"
        );
        routes.learn("/r");
        assert!(routes.should_coalesce("/r"));
    }
}
