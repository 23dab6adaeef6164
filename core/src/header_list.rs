//! A message's header fields as one value. The Worker reads a request's or
//! a response's headers from the runtime once (one call into JavaScript,
//! where each `Headers.get` was one) and hands them in; the core and the
//! glue look them up here at no crossing.

use std::borrow::Cow;

/// The header fields of one request or response, names lower case as the
/// runtime iterates them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderList {
    /// Name, value, name, value, ... joined by `\n`, which neither a name
    /// nor a value may hold (the runtime refuses such a header).
    joined: String,
    /// Where each field's name starts and its value starts and ends in
    /// `joined`: found in one pass, so a look-up compares names only.
    spans: Vec<[usize; 3]>,
}

impl HeaderList {
    /// No fields.
    pub const EMPTY: Self = Self {
        joined: String::new(),
        spans: Vec::new(),
    };

    /// From the runtime's fields, name and value alternating, joined by `\n`
    /// (a name without its value at the end is left out).
    pub fn from_joined(joined: String) -> Self {
        let mut spans = Vec::new();
        if !joined.is_empty() {
            let mut ends = joined
                .match_indices('\n')
                .map(|(i, _)| i)
                .chain([joined.len()]);
            let mut start = 0;
            while let (Some(name_end), Some(value_end)) = (ends.next(), ends.next()) {
                spans.push([start, name_end + 1, value_end]);
                start = value_end + 1;
            }
        }
        Self { joined, spans }
    }

    /// From name-value pairs (tests and the simulator); a pair holding a
    /// `\n` is left out, as the runtime would refuse it.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut joined = String::new();
        for (name, value) in pairs {
            if name.contains('\n') || value.contains('\n') {
                continue;
            }
            if !joined.is_empty() {
                joined.push('\n');
            }
            joined.push_str(&name.to_ascii_lowercase());
            joined.push('\n');
            joined.push_str(value);
        }
        Self::from_joined(joined)
    }

    /// Each field, in the runtime's order.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.spans
            .iter()
            .map(|&[name, value, end]| (&self.joined[name..value - 1], &self.joined[value..end]))
    }

    /// The field `name` (lower case), its values joined by `, ` when it
    /// comes more than once, as `Headers.get` gives it.
    pub fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        let mut found: Option<Cow<'_, str>> = None;
        for (_, value) in self.fields().filter(|(n, _)| n.eq_ignore_ascii_case(name)) {
            found = Some(match found {
                None => Cow::Borrowed(value),
                Some(first) => Cow::Owned(format!("{first}, {value}")),
            });
        }
        found
    }

    /// Whether the field `name` (lower case) is there.
    pub fn has(&self, name: &str) -> bool {
        self.fields().any(|(n, _)| n.eq_ignore_ascii_case(name))
    }

    /// Every field's name, once per field.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.fields().map(|(name, _)| name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_as_the_runtime_joined_them() {
        let h = HeaderList::from_joined("accept\n*/*\nx-empty\n\nvary\naccept".to_string());
        assert_eq!(h.get("accept").as_deref(), Some("*/*"));
        assert_eq!(h.get("x-empty").as_deref(), Some(""));
        assert_eq!(h.get("vary").as_deref(), Some("accept"));
        assert_eq!(h.get("missing"), None);
        assert!(h.has("x-empty") && !h.has("x-emp"));
        assert_eq!(h.names().collect::<Vec<_>>(), ["accept", "x-empty", "vary"]);
    }

    #[test]
    fn no_fields_is_empty_and_a_repeated_field_is_joined() {
        let none = HeaderList::from_joined(String::new());
        assert_eq!(none.fields().count(), 0);
        assert!(!none.has(""));
        let cookies = HeaderList::from_pairs([("Set-Cookie", "a=1"), ("set-cookie", "b=2")]);
        assert_eq!(cookies.get("set-cookie").as_deref(), Some("a=1, b=2"));
        // A field the runtime could not hold is not made up.
        let odd = HeaderList::from_pairs([("a", "x\ny"), ("b", "1")]);
        assert_eq!(odd.fields().collect::<Vec<_>>(), [("b", "1")]);
        // A name cut off from its value is no field.
        let cut = HeaderList::from_joined("b\n1\nc".to_string());
        assert_eq!(cut.fields().collect::<Vec<_>>(), [("b", "1")]);
    }
}
