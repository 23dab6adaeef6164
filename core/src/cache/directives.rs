//! Cache directives as a shared cache reads them: `Cache-Control` (RFC 9111
//! section 5.2, a comma list whose values may be quoted strings) and the
//! targeted fields `CDN-Cache-Control` and `Cloudflare-CDN-Cache-Control`
//! (RFC 9213, structured-field dictionaries).
//!
//! Parsing is strict where a mistake would serve something for too long:
//! directive names are case-insensitive, a comma inside a quoted string does
//! not split, the first occurrence of a directive wins, and a freshness value
//! that is not a plain non-negative integer (`-1`, `'60'`, `1.5`) counts as
//! zero (stale at once), never as absent. A targeted field that is not a valid
//! dictionary, or gives a known directive a value of the wrong type, is
//! ignored as a whole, as RFC 9213 says.

use crate::request::outbound::is_token;

/// Most `Cache-Control` elements read; a longer list reads as `no-store` too.
pub const MAX_DIRECTIVES: usize = 64;

/// Every directive this cache reads from `Cache-Control` (the first
/// occurrence of each wins).
const KNOWN: [&str; 12] = [
    "max-age",
    "s-maxage",
    "stale-while-revalidate",
    "stale-if-error",
    "min-fresh",
    "no-store",
    "no-cache",
    "private",
    "public",
    "must-revalidate",
    "proxy-revalidate",
    "only-if-cached",
];

/// The largest delta-seconds a cache must represent (RFC 9111 section 1.2.2):
/// anything larger, or an overflow, is this.
pub const MAX_DELTA_SECONDS: u64 = 2_147_483_648;

/// The directives that matter to this cache, from one field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Directives {
    /// `max-age`, seconds (an invalid value reads as 0).
    pub max_age: Option<u64>,
    /// `s-maxage`, seconds (an invalid value reads as 0).
    pub s_maxage: Option<u64>,
    /// `stale-while-revalidate`, seconds (RFC 5861; an invalid value is ignored).
    pub stale_while_revalidate: Option<u64>,
    /// `stale-if-error`, seconds (RFC 5861; an invalid value is ignored).
    pub stale_if_error: Option<u64>,
    /// `min-fresh` (requests), seconds.
    pub min_fresh: Option<u64>,
    /// `no-store`.
    pub no_store: bool,
    /// `no-cache`, with or without a field list.
    pub no_cache: bool,
    /// `private`, with or without a field list.
    pub private: bool,
    /// `public`.
    pub public: bool,
    /// `must-revalidate`.
    pub must_revalidate: bool,
    /// `proxy-revalidate`.
    pub proxy_revalidate: bool,
    /// `only-if-cached` (requests).
    pub only_if_cached: bool,
}

impl Directives {
    /// Reads a `Cache-Control` value (several field lines joined with commas),
    /// in one pass: a known directive's first occurrence wins (a bit per
    /// name, no list of names seen). Past [`MAX_DIRECTIVES`] elements the
    /// field is nobody's ordinary header: it reads as `no-store` as well, so
    /// an answer carrying it is never stored and a request carrying it is
    /// never answered from the cache.
    pub fn from_cache_control(value: Option<&str>) -> Self {
        let mut d = Directives::default();
        let mut seen: u16 = 0;
        for (count, element) in split_list(value.unwrap_or_default()).enumerate() {
            if count == MAX_DIRECTIVES {
                d.no_store = true;
                break;
            }
            let Some((name, raw)) = split_directive(element) else {
                continue;
            };
            let Some(bit) = KNOWN.iter().position(|k| *k == name) else {
                continue;
            };
            if seen & (1 << bit) != 0 {
                continue;
            }
            seen |= 1 << bit;
            let value = raw.map(unquote);
            d.apply(&name, value.as_ref().map(|v| v.as_deref()));
        }
        d
    }

    /// Reads a targeted field (`CDN-Cache-Control`); `None` when it is not a
    /// valid structured-field dictionary or a known directive has a value of
    /// the wrong type, and so is to be ignored.
    pub fn from_targeted(value: &str) -> Option<Self> {
        let mut d = Directives::default();
        for (name, item) in parse_dictionary(value)? {
            let typed = match (&item, is_seconds_directive(&name)) {
                (Item::Integer(n), true) => Some(n.to_string()),
                (Item::Boolean(true), false) => None,
                // A known directive with a value of the wrong type.
                (_, true) | (_, false) if is_known(&name) => return None,
                _ => None,
            };
            d.apply(&name, typed.as_deref().map(Some));
        }
        Some(d)
    }

    /// Sets one directive. `value`: `None` without `=`, `Some(None)` for a
    /// value that is not a well-formed quoted string, else the value.
    fn apply(&mut self, name: &str, value: Option<Option<&str>>) {
        let value = value.flatten();
        match name {
            "max-age" => self.max_age = Some(delta_or_zero(value)),
            "s-maxage" => self.s_maxage = Some(delta_or_zero(value)),
            "stale-while-revalidate" => self.stale_while_revalidate = value.and_then(delta),
            "stale-if-error" => self.stale_if_error = value.and_then(delta),
            "min-fresh" => self.min_fresh = value.and_then(delta),
            "no-store" => self.no_store = true,
            "no-cache" => self.no_cache = true,
            "private" => self.private = true,
            "public" => self.public = true,
            "must-revalidate" => self.must_revalidate = true,
            "proxy-revalidate" => self.proxy_revalidate = true,
            "only-if-cached" => self.only_if_cached = true,
            _ => {}
        }
    }
}

/// The directives this shared cache obeys for a response: a valid
/// `Cloudflare-CDN-Cache-Control`, else a valid `CDN-Cache-Control`, else
/// `Cache-Control`. The second field says whether a targeted field decided.
pub fn response_directives(
    cache_control: Option<&str>,
    cdn_cache_control: Option<&str>,
    cloudflare_cdn_cache_control: Option<&str>,
) -> (Directives, bool) {
    for targeted in [cloudflare_cdn_cache_control, cdn_cache_control]
        .into_iter()
        .flatten()
    {
        if let Some(d) = Directives::from_targeted(targeted) {
            return (d, true);
        }
    }
    (Directives::from_cache_control(cache_control), false)
}

fn is_seconds_directive(name: &str) -> bool {
    matches!(
        name,
        "max-age" | "s-maxage" | "stale-while-revalidate" | "stale-if-error"
    )
}

fn is_known(name: &str) -> bool {
    is_seconds_directive(name)
        || matches!(
            name,
            "no-store" | "no-cache" | "private" | "public" | "must-revalidate" | "proxy-revalidate"
        )
}

/// delta-seconds: 1*DIGIT, saturating at [`MAX_DELTA_SECONDS`].
pub fn delta(value: &str) -> Option<u64> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(
        value
            .parse::<u64>()
            .map_or(MAX_DELTA_SECONDS, |n| n.min(MAX_DELTA_SECONDS)),
    )
}

fn delta_or_zero(value: Option<&str>) -> u64 {
    value.and_then(delta).unwrap_or(0)
}

/// Splits a comma list, keeping commas inside quoted strings; lazily, so a
/// reader that stops early reads no further.
fn split_list(text: &str) -> impl Iterator<Item = &str> {
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    let mut chars = text.char_indices();
    std::iter::from_fn(move || {
        if start > text.len() {
            return None;
        }
        for (i, c) in chars.by_ref() {
            match c {
                _ if escaped => escaped = false,
                '\\' if quoted => escaped = true,
                '"' => quoted = !quoted,
                ',' if !quoted => {
                    let part = &text[start..i];
                    start = i + 1;
                    return Some(part);
                }
                _ => {}
            }
        }
        let part = &text[start..];
        start = text.len() + 1;
        Some(part)
    })
}

/// `name[=value]` with a token name (lower-cased); `None` for anything else
/// (an empty element, a quoted string standing alone).
fn split_directive(element: &str) -> Option<(String, Option<&str>)> {
    let element = element.trim();
    let (name, value) = match element.split_once('=') {
        Some((n, v)) => (n.trim(), Some(v.trim())),
        None => (element, None),
    };
    is_token(name).then(|| (name.to_ascii_lowercase(), value))
}

/// A token value as it is, a quoted string unescaped; `None` for a quoted
/// string that does not end where it should.
fn unquote(value: &str) -> Option<String> {
    let Some(inner) = value.strip_prefix('"') else {
        return Some(value.to_string());
    };
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?),
            '"' => return chars.as_str().trim().is_empty().then_some(out),
            c => out.push(c),
        }
    }
    None
}

/// A structured-field bare item, as far as this cache needs to tell them apart.
#[derive(Debug, Clone, PartialEq)]
enum Item {
    Integer(i64),
    Boolean(bool),
    Other,
}

/// Parses a structured-field dictionary (RFC 8941 section 3.2); `None` when
/// it is not one.
fn parse_dictionary(text: &str) -> Option<Vec<(String, Item)>> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let mut members = Vec::new();
    p.skip(b" \t");
    if p.done() {
        return Some(members);
    }
    loop {
        let key = p.key()?;
        let item = if p.eat(b'=') {
            p.bare_item()?
        } else {
            Item::Boolean(true)
        };
        p.parameters()?;
        members.push((key, item));
        p.skip(b" \t");
        if p.done() {
            return Some(members);
        }
        if !p.eat(b',') {
            return None;
        }
        p.skip(b" \t");
        if p.done() {
            return None; // a trailing comma
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn done(&self) -> bool {
        self.i >= self.s.len()
    }
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.i += usize::from(hit);
        hit
    }
    fn skip(&mut self, set: &[u8]) {
        while self.peek().is_some_and(|b| set.contains(&b)) {
            self.i += 1;
        }
    }
    fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &str {
        let start = self.i;
        while self.peek().is_some_and(&f) {
            self.i += 1;
        }
        std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default()
    }
    fn key(&mut self) -> Option<String> {
        let first = self.peek()?;
        if !(first.is_ascii_lowercase() || first == b'*') {
            return None;
        }
        let key = self
            .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-.*".contains(&b));
        Some(key.to_string())
    }
    fn parameters(&mut self) -> Option<()> {
        while self.eat(b';') {
            self.skip(b" ");
            self.key()?;
            if self.eat(b'=') {
                self.bare_item()?;
            }
        }
        Some(())
    }
    fn bare_item(&mut self) -> Option<Item> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'"' => {
                self.i += 1;
                loop {
                    match self.peek()? {
                        b'\\' => {
                            self.i += 1;
                            if !matches!(self.peek()?, b'"' | b'\\') {
                                return None;
                            }
                            self.i += 1;
                        }
                        b'"' => {
                            self.i += 1;
                            return Some(Item::Other);
                        }
                        0x20..=0x7e => self.i += 1,
                        _ => return None,
                    }
                }
            }
            b'?' => {
                self.i += 1;
                let value = match self.peek()? {
                    b'0' => false,
                    b'1' => true,
                    _ => return None,
                };
                self.i += 1;
                Some(Item::Boolean(value))
            }
            b':' => {
                self.i += 1;
                self.take_while(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
                self.eat(b':').then_some(Item::Other)
            }
            b if b.is_ascii_alphabetic() || b == b'*' => {
                self.take_while(|b| is_token(&char::from(b).to_string()) || b":/".contains(&b));
                Some(Item::Other)
            }
            _ => None,
        }
    }
    fn number(&mut self) -> Option<Item> {
        let negative = self.eat(b'-');
        let int = self.take_while(|b| b.is_ascii_digit()).to_string();
        if int.is_empty() || int.len() > 15 {
            return None;
        }
        if self.eat(b'.') {
            let frac = self.take_while(|b| b.is_ascii_digit());
            if frac.is_empty() || frac.len() > 3 || int.len() > 12 {
                return None;
            }
            return Some(Item::Other);
        }
        let n: i64 = int.parse().ok()?;
        Some(Item::Integer(if negative { -n } else { n }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc(v: &str) -> Directives {
        Directives::from_cache_control(Some(v))
    }

    #[test]
    fn a_list_past_the_cap_reads_as_no_store_and_is_read_no_further() {
        let names = |n: usize| (0..n).map(|i| format!("x-{i}")).collect::<Vec<_>>();
        let at_cap = format!("max-age=60, {}", names(MAX_DIRECTIVES - 1).join(", "));
        let d = cc(&at_cap);
        assert_eq!((d.max_age, d.no_store), (Some(60), false));
        // A hostile header: 10,000 distinct names (60 KB), then a directive.
        let hostile = format!("max-age=60, {}, s-maxage=5", names(10_000).join(", "));
        let d = cc(&hostile);
        assert!(d.no_store, "past {MAX_DIRECTIVES} elements: not storable");
        assert_eq!(d.s_maxage, None, "read no further than the cap");
        assert_eq!(d.max_age, Some(60));
    }

    #[test]
    fn the_first_occurrence_of_a_known_directive_wins() {
        let d = cc("max-age=10, MAX-AGE=99, no-cache, x=1, x=2, max-age=7");
        assert_eq!(d.max_age, Some(10));
        assert!(d.no_cache);
    }

    #[test]
    fn names_are_case_insensitive_and_values_may_be_quoted() {
        assert_eq!(cc("MaX-AgE=60").max_age, Some(60));
        assert_eq!(cc("max-age=\"10\"").max_age, Some(10));
        assert_eq!(cc("max-age=003600").max_age, Some(3600));
        assert!(cc("nO-StOrE").no_store);
        assert!(cc("private=\"set-cookie\"").private);
    }

    #[test]
    fn bad_freshness_values_read_as_stale_not_absent() {
        for v in [
            "max-age=-1",
            "max-age='60'",
            "max-age=1.5",
            "max-age=",
            "max-age=\"6",
        ] {
            assert_eq!(cc(v).max_age, Some(0), "{v}");
        }
        assert_eq!(
            cc("max-age=99999999999999999999").max_age,
            Some(MAX_DELTA_SECONDS)
        );
    }

    #[test]
    fn a_comma_in_a_quoted_string_does_not_start_a_directive() {
        let d = cc("foo=\"max-age=3600, bar\", max-age=1");
        assert_eq!(d.max_age, Some(1));
        let d = cc("\"max-age=3600\"");
        assert_eq!(d.max_age, None);
    }

    #[test]
    fn the_first_occurrence_wins() {
        assert_eq!(cc("max-age=1, max-age=3600").max_age, Some(1));
    }

    #[test]
    fn stale_extensions_are_read() {
        let d = cc("max-age=1, stale-while-revalidate=30, stale-if-error=60");
        assert_eq!(d.stale_while_revalidate, Some(30));
        assert_eq!(d.stale_if_error, Some(60));
        assert_eq!(cc("stale-if-error=x").stale_if_error, None);
    }

    #[test]
    fn a_valid_targeted_field_replaces_cache_control() {
        let (d, targeted) = response_directives(Some("no-store"), Some("max-age=600"), None);
        assert!(targeted);
        assert_eq!(d.max_age, Some(600));
        assert!(!d.no_store);
        let (d, _) = response_directives(Some("max-age=600"), Some("no-store"), Some("private"));
        assert!(
            d.private && !d.no_store,
            "Cloudflare's field takes precedence"
        );
    }

    #[test]
    fn an_invalid_targeted_field_is_ignored() {
        for bad in [
            "max-age=10000, &&&&&",
            "max-age=\"10000\"",
            "Max-Age=10",
            "max-age=1,",
            "max-age=1.5",
        ] {
            assert_eq!(Directives::from_targeted(bad), None, "{bad}");
            let (d, targeted) = response_directives(Some("no-store"), Some(bad), None);
            assert!(!targeted && d.no_store, "{bad}");
        }
        let d = Directives::from_targeted("max-age=10;a=1, no-store, x=\"y\", z=?0").unwrap();
        assert_eq!(d.max_age, Some(10));
        assert!(d.no_store);
        assert_eq!(Directives::from_targeted("private=?0"), None);
    }
}
