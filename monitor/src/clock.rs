//! Wall-clock instants as Unix nanoseconds: parsing the RFC 3339 timestamps Docker puts in
//! front of log lines (`2026-11-23T17:49:57.123456789Z`) and writing the same form for the
//! monitor's own markers, peak.json and diagnostic bundle names. UTC only, as Docker writes
//! them; no calendar crate for two small conversions.

use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Stamp(pub i64);

const NS: i64 = 1_000_000_000;

impl Stamp {
    pub fn now() -> Self {
        let d = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Stamp(d.as_secs() as i64 * NS + i64::from(d.subsec_nanos()))
    }

    /// Whole seconds, rounded down (what Docker's `since` takes).
    pub fn secs(self) -> i64 {
        self.0.div_euclid(NS)
    }

    /// `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`, Docker's fixed-width form (sorts as text).
    pub fn rfc3339(self) -> String {
        let (days, rem) = (
            self.0.div_euclid(NS * 86_400),
            self.0.rem_euclid(NS * 86_400),
        );
        let (y, m, d) = civil_from_days(days);
        let secs = rem / NS;
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:09}Z",
            secs / 3600,
            secs / 60 % 60,
            secs % 60,
            rem % NS
        )
    }

    /// Seconds resolution, for file names and JSON a person reads: `2026-11-23T17:49:57Z`.
    pub fn rfc3339_secs(self) -> String {
        let full = self.rfc3339();
        format!("{}Z", &full[..19])
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)`.
    pub fn parse(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse().ok() };
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
            return None;
        }
        let mut rest = &s[19..];
        let mut nanos = 0i64;
        if let Some(frac) = rest.strip_prefix('.') {
            let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            for (i, c) in frac[..digits].bytes().take(9).enumerate() {
                nanos += i64::from(c - b'0') * 10i64.pow(8 - i as u32);
            }
            rest = &frac[digits..];
        }
        let offset = match rest {
            "Z" | "z" => 0,
            _ => {
                let sign = match rest.as_bytes().first()? {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return None,
                };
                let oh: i64 = rest.get(1..3)?.parse().ok()?;
                let om: i64 = rest.get(4..6)?.parse().ok()?;
                if rest.len() != 6 {
                    return None;
                }
                sign * (oh * 3600 + om * 60)
            }
        };
        let days = days_from_civil(y, mo, d);
        let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset;
        Some(Stamp(secs * NS + nanos))
    }
}

/// Howard Hinnant's days_from_civil: days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of `days_from_civil`.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_timestamps_round_trip() {
        let s = "2026-11-23T17:49:57.123456789Z";
        let t = Stamp::parse(s).unwrap();
        assert_eq!(t.rfc3339(), s);
        assert_eq!(t.rfc3339_secs(), "2026-11-23T17:49:57Z");
        assert_eq!(Stamp::parse("1970-01-01T00:00:01Z"), Some(Stamp(NS)));
        assert_eq!(
            Stamp::parse("2000-03-01T00:00:00Z").unwrap().secs(),
            951_868_800
        );
    }

    #[test]
    fn fractions_and_offsets() {
        let a = Stamp::parse("2026-01-02T03:04:05.5Z").unwrap();
        assert_eq!(a.0 % NS, 500_000_000);
        let b = Stamp::parse("2026-01-02T05:04:05.5+02:00").unwrap();
        assert_eq!(a, b);
        assert!(Stamp::parse("2026-01-02 03:04:05Z").is_none());
        assert!(Stamp::parse("2026-13-02T03:04:05Z").is_none());
        assert!(Stamp::parse("2026-01-02T03:04:05.Z").is_none());
    }

    #[test]
    fn now_formats_and_parses_back() {
        let t = Stamp::now();
        assert_eq!(Stamp::parse(&t.rfc3339()), Some(t));
    }
}
