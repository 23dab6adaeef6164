//! A scenario's cacheable traffic: which URLs requests ask for, and what
//! the origins answer about them (how long an answer stays fresh, its
//! `ETag`, a `304` to a leg that asks with the current one).

use crate::header_list::HeaderList;

/// A scenario's cacheable traffic: requests spread over URLs by popularity,
/// answered by origins that say how long an answer stays fresh and whose
/// representations change now and then.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheSpec {
    /// URLs per route (`/r{route}/k{n}`); the n-th most popular (from 1)
    /// is asked in proportion to 1 / n^`zipf`.
    pub keys: usize,
    /// The popularity law's exponent.
    pub zipf: f64,
    /// The origins' `Cache-Control: max-age`, s.
    pub max_age_s: u64,
    /// ... and `stale-while-revalidate`, s.
    pub stale_while_revalidate_s: u64,
    /// Each URL's representation (and its `ETag`) changes this often, s.
    pub changes_every_s: f64,
    /// A read of the cache, ms (it is local to the PoP).
    pub lookup_ms: f64,
    /// The body's length, bytes.
    pub body_bytes: u64,
}

impl CacheSpec {
    /// The cumulative popularity of the keys, for drawing one.
    pub(crate) fn popularity(&self) -> Vec<f64> {
        let weights: Vec<f64> = (1..=self.keys.max(1))
            .map(|n| 1.0 / (n as f64).powf(self.zipf))
            .collect();
        let total: f64 = weights.iter().sum();
        let mut sum = 0.0;
        weights
            .iter()
            .map(|w| {
                sum += w / total;
                sum
            })
            .collect()
    }

    /// The `ETag` of `key`'s representation at `at_ms` (each key changes on
    /// its own phase).
    pub(crate) fn etag(&self, key: usize, at_ms: f64) -> String {
        let period_ms = self.changes_every_s * 1000.0;
        let phase_ms = (key as f64 * 0.618_034).fract() * period_ms;
        let version = ((at_ms + phase_ms) / period_ms).floor();
        format!("\"k{key}v{version}\"")
    }

    /// The origin's answer to a leg served at `at_ms` with `status`: its
    /// status (a `304` to a leg that asked with the current `ETag`) and
    /// header fields.
    pub(crate) fn origin_answer(
        &self,
        key: usize,
        status: u16,
        if_none_match: Option<&str>,
        at_ms: f64,
    ) -> (u16, HeaderList) {
        let etag = self.etag(key, at_ms);
        // Every answer is dated (RFC 9110 section 6.6.1): a `304` merged
        // into an entry renews its date, and so its age.
        let date = http_date(at_ms);
        if status >= 300 {
            let fields = [("date", date.as_str()), ("content-length", "0")];
            return (status, HeaderList::from_pairs(fields));
        }
        let cache_control = format!(
            "max-age={}, stale-while-revalidate={}",
            self.max_age_s, self.stale_while_revalidate_s
        );
        if if_none_match == Some(etag.as_str()) {
            let fields = [
                ("date", date.as_str()),
                ("cache-control", &cache_control),
                ("etag", &etag),
            ];
            return (304, HeaderList::from_pairs(fields));
        }
        let length = self.body_bytes.to_string();
        let fields = [
            ("date", date.as_str()),
            ("cache-control", &cache_control),
            ("etag", &etag),
            ("content-length", &length),
        ];
        (status, HeaderList::from_pairs(fields))
    }
}

/// `ms` on the virtual clock (from the Unix epoch) as an HTTP date
/// (IMF-fixdate), to the second.
fn http_date(ms: f64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = (ms / 1000.0).floor() as i64;
    let (days, second) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // The civil date of a day count (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        second / 3_600,
        second % 3_600 / 60,
        second % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::http_date;

    #[test]
    fn dates_read_back_as_the_second_they_were_written_at() {
        assert_eq!(http_date(0.0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(
            http_date(951_782_400_000.0),
            "Tue, 29 Feb 2000 00:00:00 GMT"
        );
        for ms in [
            1_500.0,
            86_399_999.0,
            1_796_601_599_000.0,
            4_102_444_800_000.0,
        ] {
            let back = http_date::parse(&http_date(ms));
            assert_eq!(back, Some((ms / 1000.0).floor() as i64), "{ms}");
        }
    }

    #[test]
    fn a_leg_asking_with_the_current_etag_is_answered_304_and_one_with_an_old_one_200() {
        let spec = CacheSpec {
            keys: 10,
            zipf: 1.0,
            max_age_s: 10,
            stale_while_revalidate_s: 0,
            changes_every_s: 60.0,
            lookup_ms: 2.0,
            body_bytes: 100,
        };
        let (status, fields) = spec.origin_answer(3, 200, None, 0.0);
        let etag = fields.get("etag").expect("an etag").into_owned();
        assert_eq!(status, 200);
        assert_eq!(fields.get("content-length").as_deref(), Some("100"));
        assert_eq!(spec.origin_answer(3, 200, Some(&etag), 1.0).0, 304);
        // Within a minute the representation changes: a full answer.
        let later = (1..=60).map(|s| spec.origin_answer(3, 200, Some(&etag), s as f64 * 1000.0).0);
        assert!(later.clone().any(|s| s == 200) && later.clone().any(|s| s == 304));
        // A failure stays one, with no freshness.
        let (status, fields) = spec.origin_answer(3, 503, Some(&etag), 1.0);
        assert_eq!((status, fields.get("cache-control")), (503, None));
    }
}
