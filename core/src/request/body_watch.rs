//! The optional body idle timeout: what the watchdog needs to decide before
//! it wraps a winner's body.
//!
//! The runtime passes an origin's body through natively, keeping its
//! `Content-Length`. A watched body is a stream the Worker makes, which the
//! runtime would send chunked; to keep the length it is piped through a
//! fixed-length stream, which is only right when the bytes the Worker reads
//! are the bytes on the wire: no `Content-Encoding` (the runtime decodes
//! encoded bodies as they are read, so their length no longer matches).

/// The length to hold a watched body to, when the client should still see
/// the origin's `Content-Length`.
pub fn fixed_length(content_length: Option<&str>, content_encoding: Option<&str>) -> Option<u64> {
    let encoded = content_encoding
        .map(str::trim)
        .is_some_and(|e| !e.is_empty() && !e.eq_ignore_ascii_case("identity"));
    if encoded {
        return None;
    }
    let length = content_length?.trim();
    // Digits only: "+5", "5 5" or "0x10" are not lengths.
    if length.is_empty() || !length.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    length.parse().ok()
}

/// Whether a body read to its end is the whole body: it ended without an
/// error, and with the declared length where there is one (`expected`, from
/// [`fixed_length`]). The runtime relays an origin's mid-body reset as an
/// ordinary end, so the length is the only proof where one was declared.
pub fn body_whole(expected: Option<u64>, received: u64, errored: bool, ended: bool) -> bool {
    ended && !errored && expected.is_none_or(|n| n == received)
}

/// The message a client-side error carries when the watchdog cut a body.
pub fn idle_message(idle_ms: f64) -> String {
    format!("the origin sent no body bytes for {idle_ms} ms (HEDGE_BODY_IDLE_TIMEOUT_MS)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_whole_only_when_it_ended_cleanly_at_its_length() {
        assert!(body_whole(Some(100), 100, false, true));
        assert!(body_whole(None, 7, false, true), "no length: a clean end");
        assert!(
            !body_whole(Some(100), 7, false, true),
            "short of the length"
        );
        assert!(
            !body_whole(Some(100), 0, false, true),
            "an empty relay of a reset"
        );
        assert!(!body_whole(None, 7, true, true), "an error");
        assert!(!body_whole(None, 7, false, false), "not read to its end");
    }

    #[test]
    fn a_plain_body_keeps_its_length() {
        assert_eq!(fixed_length(Some("11"), None), Some(11));
        assert_eq!(fixed_length(Some(" 0 "), Some("identity")), Some(0));
    }

    #[test]
    fn an_encoded_body_goes_out_chunked() {
        assert_eq!(fixed_length(Some("11"), Some("gzip")), None);
        assert_eq!(fixed_length(Some("11"), Some("br")), None);
    }

    #[test]
    fn without_a_sane_length_it_goes_out_chunked() {
        assert_eq!(fixed_length(None, None), None);
        for bad in [
            "",
            "+5",
            "-1",
            "5 5",
            "0x10",
            "1e3",
            "99999999999999999999999",
        ] {
            assert_eq!(fixed_length(Some(bad), None), None, "{bad}");
        }
    }
}
