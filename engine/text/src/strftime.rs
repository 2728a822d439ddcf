//! `strftime_now(format)` for chat templates (Llama 3.x prints "Today Date: 26 Jul 2024").
//!
//! transformers calls `datetime.now().strftime(format)`, the server's local time; Hearth runs in
//! containers on UTC, so this formats UTC. Covers the C89 directives templates use; an unknown
//! directive is copied through as Python does on glibc.

use std::time::{SystemTime, UNIX_EPOCH};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// A broken-down UTC time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tm {
    pub year: i64,
    /// 1..=12
    pub month: u32,
    /// 1..=31
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    /// 0 = Monday
    pub weekday: u32,
    /// 1..=366
    pub yday: u32,
}

impl Tm {
    pub(crate) fn from_unix(secs: i64) -> Tm {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        let jan1 = days_from_civil(year, 1, 1);
        Tm {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: (rem % 3600 / 60) as u32,
            second: (rem % 60) as u32,
            // 1970-01-01 was a Thursday (3 when Monday is 0).
            weekday: (days + 3).rem_euclid(7) as u32,
            yday: (days - jan1 + 1) as u32,
        }
    }

    pub(crate) fn now() -> Tm {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        Tm::from_unix(secs)
    }
}

/// Howard Hinnant's days -> (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Python's `time.strftime` for the common directives.
pub(crate) fn strftime(fmt: &str, t: &Tm) -> String {
    let mut out = String::with_capacity(fmt.len() + 16);
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(d) = chars.next() else {
            out.push('%');
            break;
        };
        let month = MONTHS[(t.month - 1) as usize];
        let day = DAYS[t.weekday as usize];
        let hour12 = match t.hour % 12 {
            0 => 12,
            h => h,
        };
        let s = match d {
            'Y' => t.year.to_string(),
            'y' => format!("{:02}", t.year.rem_euclid(100)),
            'm' => format!("{:02}", t.month),
            'd' => format!("{:02}", t.day),
            'e' => format!("{:>2}", t.day),
            'H' => format!("{:02}", t.hour),
            'I' => format!("{hour12:02}"),
            'M' => format!("{:02}", t.minute),
            'S' => format!("{:02}", t.second),
            'p' => (if t.hour < 12 { "AM" } else { "PM" }).to_owned(),
            'B' => month.to_owned(),
            'b' | 'h' => month[..3].to_owned(),
            'A' => day.to_owned(),
            'a' => day[..3].to_owned(),
            'j' => format!("{:03}", t.yday),
            'u' => (t.weekday + 1).to_string(),
            'w' => ((t.weekday + 1) % 7).to_string(),
            'F' => format!("{}-{:02}-{:02}", t.year, t.month, t.day),
            'T' => format!("{:02}:{:02}:{:02}", t.hour, t.minute, t.second),
            'D' => format!("{:02}/{:02}/{:02}", t.month, t.day, t.year.rem_euclid(100)),
            'Z' => "UTC".to_owned(),
            'z' => "+0000".to_owned(),
            '%' => "%".to_owned(),
            other => format!("%{other}"),
        };
        out.push_str(&s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_a_known_instant() {
        // 2024-07-26 13:25:09 UTC, a Friday.
        let t = Tm::from_unix(1_722_000_309);
        assert_eq!(
            (t.year, t.month, t.day, t.hour, t.minute, t.second, t.weekday),
            (2024, 7, 26, 13, 25, 9, 4)
        );
        assert_eq!(strftime("%d %b %Y", &t), "26 Jul 2024");
        assert_eq!(
            strftime("%A, %B %e %I:%M %p (%j) %% %q", &t),
            "Friday, July 26 01:25 PM (208) % %q"
        );
        assert_eq!(strftime("%F %T", &Tm::from_unix(0)), "1970-01-01 00:00:00");
        assert_eq!(strftime("%a %y", &Tm::from_unix(951_782_400)), "Tue 00"); // 2000-02-29
    }
}
