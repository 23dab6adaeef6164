//! Reads keys one by one, collecting every problem so one pass reports all
//! of them; a key absent (or invalid) takes its declared default.

use std::collections::BTreeMap;
use std::fmt;

use super::keys::{Key, Range, KEYS};
use super::ConfigError;

/// Collects errors while reading keys, so one pass reports all of them.
pub(super) struct Reader<'a> {
    vars: &'a BTreeMap<String, String>,
    pub(super) errors: Vec<ConfigError>,
}

// === impl Reader ===

impl<'a> Reader<'a> {
    /// A reader of `vars`, with no problem found yet.
    pub(super) fn new(vars: &'a BTreeMap<String, String>) -> Self {
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
        let vars: &'a BTreeMap<String, String> = self.vars;
        vars.get(key).map(|v| v.trim())
    }

    /// The declaration of `key`; a read of an undeclared key is reported as
    /// a configuration error (a test keeps every read declared).
    fn declared(&mut self, key: &str) -> Option<Key> {
        let found = KEYS.iter().find(|k| k.name == key).copied();
        if found.is_none() {
            self.fail(key, "internal: read but not declared in KEYS");
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

    /// A key's declared default, as text.
    pub(super) fn default_text(&mut self, key: &str) -> &'static str {
        self.declared(key).map_or("", |k| k.default)
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

    pub(super) fn unknown_keys(&mut self) {
        let unknown: Vec<String> = self
            .vars
            .keys()
            .filter(|k| {
                k.starts_with("HEDGE_") && !KEYS.iter().any(|known| known.name == k.as_str())
            })
            .cloned()
            .collect();
        for key in unknown {
            self.fail(
                &key,
                "unknown key (a typo?); see the README's configuration table",
            );
        }
    }
}
