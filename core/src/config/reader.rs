//! Reads keys one by one, collecting every problem so one pass reports all
//! of them; a key absent (or invalid) takes its declared default.

use crate::vec_map::VecMap;
use std::fmt;

use super::keys::{replacement, Key, Range, KEYS, TUNING, TUNING_PREFIX};
use super::ConfigError;

/// Collects errors while reading keys, so one pass reports all of them.
pub(super) struct Reader<'a> {
    vars: &'a VecMap<String, String>,
    pub(super) errors: Vec<ConfigError>,
}

// === impl Reader ===

impl<'a> Reader<'a> {
    /// A reader of `vars`, with no problem found yet.
    pub(super) fn new(vars: &'a VecMap<String, String>) -> Self {
        Self {
            vars,
            errors: Vec::new(),
        }
    }

    pub(super) fn fail(&mut self, key: &str, reason: impl Into<String>) {
        self.errors.push(ConfigError {
            key: key.to_string(),
            reason: reason.into(),
        });
    }

    pub(super) fn raw(&self, key: &str) -> Option<&'a str> {
        let vars: &'a VecMap<String, String> = self.vars;
        vars.get(key).map(|v| v.trim())
    }

    /// The declaration of `key`; a read of an undeclared key is reported as
    /// a configuration error (a test keeps every read declared).
    fn declared(&mut self, key: &str) -> Option<Key> {
        let found = declaration(key);
        if found.is_none() {
            self.fail(key, "internal: read but not declared in KEYS or TUNING");
        }
        found
    }

    /// A number in its declared range, or its declared default when absent
    /// (the range's minimum for a key with no numeric default, which is
    /// only read where it is required).
    pub(super) fn number(&mut self, key: &str) -> f64 {
        match self.declared(key) {
            Some(Key {
                default,
                range: Range::Number { min, max },
                ..
            }) => self.bounded(key, default, min, max, "a number", |v: &f64| v.is_finite()),
            _ => {
                self.fail(key, "internal: not declared as a number");
                0.0
            }
        }
    }

    /// A whole number in its declared range, or its declared default when absent.
    pub(super) fn integer(&mut self, key: &str) -> u64 {
        match self.declared(key) {
            Some(Key {
                default,
                range: Range::Whole { min, max },
                ..
            }) => self.bounded(key, default, min, max, "a whole number", |_| true),
            _ => {
                self.fail(key, "internal: not declared as a whole number");
                0
            }
        }
    }

    /// `key` parsed as `T` within `[min, max]` (and `sane`), else `default`
    /// (or `min` where the default is not a value) with the problem reported.
    fn bounded<T>(
        &mut self,
        key: &str,
        default: &str,
        min: T,
        max: T,
        what: &str,
        sane: impl Fn(&T) -> bool,
    ) -> T
    where
        T: std::str::FromStr + PartialOrd + Copy + fmt::Display,
    {
        let default = default.parse::<T>().unwrap_or(min);
        let Some(raw) = self.raw(key) else {
            return default;
        };
        match raw.parse::<T>() {
            Ok(v) if sane(&v) && min <= v && v <= max => v,
            _ => {
                self.fail(
                    key,
                    format!("expected {what} from {min} to {max}, got {raw:?}"),
                );
                default
            }
        }
    }

    /// `true` or `false`, or its declared default when absent.
    pub(super) fn boolean(&mut self, key: &str) -> bool {
        let Some(Key {
            default,
            range: Range::Flag,
            ..
        }) = self.declared(key)
        else {
            self.fail(key, "internal: not declared as true / false");
            return false;
        };
        let default = default == "true";
        match self.raw(key).map(|v| v.to_ascii_lowercase()).as_deref() {
            None => default,
            Some("true") => true,
            Some("false") => false,
            Some(other) => {
                self.fail(key, format!("expected true or false, got {other:?}"));
                default
            }
        }
    }

    /// A text key's value, or its declared default when absent.
    pub(super) fn text(&mut self, key: &str) -> &'a str {
        match (self.raw(key), self.declared(key)) {
            (Some(raw), _) => raw,
            (None, Some(declared)) => declared.default,
            (None, None) => "",
        }
    }

    /// A text key read with `read`; its declared default (read the same
    /// way) with the problem reported when `read` refuses the value.
    /// `placeholder` is returned only when the declared default itself does
    /// not read, with that reported too, so it never reaches a caller of
    /// `parse` (a test keeps every default readable).
    pub(super) fn parsed<T>(
        &mut self,
        key: &str,
        read: impl Fn(&str) -> Result<T, String>,
        placeholder: T,
    ) -> T {
        let value = self.text(key);
        match read(value) {
            Ok(v) => return v,
            Err(reason) => self.fail(key, reason),
        }
        let default = self.declared(key).map_or("", |k| k.default);
        read(default).unwrap_or_else(|reason| {
            self.fail(
                key,
                format!("internal: the declared default does not read: {reason}"),
            );
            placeholder
        })
    }

    /// Every `HEDGE_*` key (and `HEDGE_TUNING` field) that is not declared:
    /// a removed one with what replaced it, any other as a likely typo.
    pub(super) fn unknown_keys(&mut self) {
        let unknown: Vec<String> = (self.vars.keys())
            .filter(|k| k.starts_with("HEDGE_") && declaration(k).is_none())
            .cloned()
            .collect();
        for key in unknown {
            match replacement(&key) {
                Some(instead) => self.fail(
                    &key,
                    format!(
                        "removed, not read any more (its value is ignored); instead: {instead}"
                    ),
                ),
                None if key.starts_with(TUNING_PREFIX) => self.fail(
                    &key,
                    "unknown HEDGE_TUNING field (a typo?); see docs/tuning.md",
                ),
                None => self.fail(
                    &key,
                    "unknown key (a typo?); see the README's configuration table",
                ),
            }
        }
    }
}

/// The declaration of `key` among the settings and the `HEDGE_TUNING` fields.
fn declaration(key: &str) -> Option<Key> {
    (KEYS.iter().chain(TUNING)).find(|k| k.name == key).copied()
}

/// `vars` with the `HEDGE_TUNING` object spread into one key per field
/// (`HEDGE_TUNING.cold_delay_ms`), so each field is read, checked and, when
/// wrong, dropped on its own like any key; a value that is not a JSON
/// object is an error of `HEDGE_TUNING` (every field then at its default).
pub(super) fn spread_tuning(
    vars: &VecMap<String, String>,
) -> (VecMap<String, String>, Vec<ConfigError>) {
    let mut out = vars.clone();
    let mut errors = Vec::new();
    let Some(raw) = out.remove("HEDGE_TUNING") else {
        return (out, errors);
    };
    let raw = raw.trim();
    if raw.is_empty() {
        return (out, errors);
    }
    match flat_object(raw) {
        Ok(fields) => {
            for (field, text) in fields {
                out.insert(format!("{TUNING_PREFIX}{field}"), text);
            }
        }
        Err(reason) => errors.push(ConfigError {
            key: "HEDGE_TUNING".to_string(),
            reason: format!("expected a JSON object of numbers, true / false or text (docs/tuning.md): {reason}"),
        }),
    }
    (out, errors)
}

/// The fields of a flat JSON object whose values are numbers, `true` /
/// `false` or strings without escapes, each as the text a key would hold (the
/// reader then checks it as it checks any key). Written out rather than a
/// serde_json deserializer: this is all `HEDGE_TUNING` needs, and the generic
/// parser instantiated for it cost 11 KB of wasm.
fn flat_object(raw: &str) -> Result<Vec<(String, String)>, String> {
    let mut rest = raw.trim_start().strip_prefix('{').ok_or("no '{'")?;
    let mut fields = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('}') {
            return match after.trim().is_empty() {
                true => Ok(fields),
                false => Err("text after the object".to_string()),
            };
        }
        if !fields.is_empty() {
            rest = rest
                .strip_prefix(',')
                .ok_or("expected ',' or '}'")?
                .trim_start();
        }
        let (field, after) = quoted(rest).ok_or("expected a field name in double quotes")?;
        rest = after
            .trim_start()
            .strip_prefix(':')
            .ok_or("expected ':'")?
            .trim_start();
        let (value, after) = match quoted(rest) {
            Some(found) => found,
            None => {
                let end = (rest.find(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c))))
                    .unwrap_or(rest.len());
                match &rest[..end] {
                    "" | "null" => {
                        return Err(format!("{field}: expected a number, true / false, or text"))
                    }
                    token => (token, &rest[end..]),
                }
            }
        };
        fields.push((field.to_string(), value.to_string()));
        rest = after;
    }
}

/// A string in double quotes at the start of `text` (no escapes), and the text after it.
fn quoted(text: &str) -> Option<(&str, &str)> {
    let inner = text.strip_prefix('"')?;
    let end = inner.find('"')?;
    let value = &inner[..end];
    (!value.contains('\\')).then_some((value, &inner[end + 1..]))
}
