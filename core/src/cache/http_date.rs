//! HTTP dates (RFC 9110 section 5.6.7) for `Date`, `Expires` and
//! `Last-Modified`: the IMF-fixdate form only (`Sun, 06 Nov 1994 08:49:37
//! GMT`), which every sender must generate. Anything else, the obsolete forms
//! included, is invalid; for `Expires` that means "already expired" (RFC 9111
//! section 5.3), the safe reading.

/// Seconds since the Unix epoch of an IMF-fixdate, or `None`.
pub fn parse(text: &str) -> Option<i64> {
    let b = text.trim().as_bytes();
    // "Sun, 06 Nov 1994 08:49:37 GMT": 29 bytes, fixed positions.
    if b.len() != 29 || &b[3..5] != b", " || &b[25..] != b" GMT" {
        return None;
    }
    const DAYS: [&[u8]; 7] = [b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun"];
    const MONTHS: [&[u8]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let weekday = DAYS.iter().position(|d| *d == &b[0..3])?;
    let month = MONTHS.iter().position(|m| *m == &b[8..11])? as i64 + 1;
    if b[7] != b' ' || b[11] != b' ' || b[16] != b' ' || b[19] != b':' || b[22] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = &b[r];
        s.iter()
            .all(u8::is_ascii_digit)
            .then(|| s.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let (day, year) = (num(5..7)?, num(12..16)?);
    let (hour, minute, second) = (num(17..19)?, num(20..22)?, num(23..25)?);
    if !(1..=days_in_month(year, month)).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    // 1970-01-01 was a Thursday (index 3).
    if (days + 3).rem_euclid(7) as usize != weekday {
        return None;
    }
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imf_fixdates_parse() {
        assert_eq!(parse("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(parse("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(parse("Tue, 29 Feb 2028 12:00:00 GMT"), Some(1_835_438_400));
    }

    #[test]
    fn other_forms_and_nonsense_are_invalid() {
        for bad in [
            "0",
            "",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun, 06 Nov 94 08:49:37 GMT",
            "Sun 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49:37 AEST",
            "Sun, 06-Nov-1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08.49.37 GMT",
            "Sun, 06 Nov 1994 8:49:37 GMT",
            "Sun,  06 Nov 1994 08:49:37 GMT",
            "Mon, 06 Nov 1994 08:49:37 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
