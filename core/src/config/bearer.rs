//! The operator token's check: whether an `Authorization` header carries
//! `Bearer <token>`, compared in time that does not depend on where a
//! presented value differs.

/// Compares a presented secret with the expected one in time that does not
/// depend on where they differ (only on the expected one's length).
pub(super) fn constant_time_eq(presented: &[u8], expected: &[u8]) -> bool {
    let mut diff = u8::from(presented.len() != expected.len());
    for (i, &e) in expected.iter().enumerate() {
        // Reads past a short presented value compare against 0, never skip.
        let p = presented.get(i).copied().unwrap_or(0);
        diff |= p ^ e;
    }
    diff == 0
}

/// Whether an `Authorization` header carries `Bearer <token>`.
pub(super) fn bearer_matches(authorization: Option<&str>, token: &str) -> bool {
    let presented = authorization
        .and_then(|h| {
            let (scheme, rest) = h.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(rest.trim())
        })
        .unwrap_or("");
    constant_time_eq(presented.as_bytes(), token.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_token_must_match_exactly() {
        let token = "s3cret-token-0123456789";
        assert!(bearer_matches(
            Some("Bearer s3cret-token-0123456789"),
            token
        ));
        assert!(bearer_matches(
            Some("bearer  s3cret-token-0123456789 "),
            token
        ));
        for wrong in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer s3cret-token-012345678"),
            Some("Bearer s3cret-token-01234567890"),
            Some("Bearer S3cret-token-0123456789"),
            Some("Basic s3cret-token-0123456789"),
            Some("s3cret-token-0123456789"),
        ] {
            assert!(!bearer_matches(wrong, token), "{wrong:?}");
        }
    }

    #[test]
    fn constant_time_eq_handles_every_length() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert!(!constant_time_eq(b"abcd", b"abc"));
        assert!(!constant_time_eq(b"", b"abc"));
        assert!(constant_time_eq(b"", b""));
    }
}
