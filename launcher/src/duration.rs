//! Durations on the command line (`--timeout 20m`, `90s`, `1h30m`, or plain seconds) and in
//! messages (`1 min 05 s`).

use std::time::Duration;

/// Parses `20m`, `90s`, `1h30m`, `1200`.
pub fn parse(text: &str) -> Result<Duration, String> {
    let err = || format!("{text:?} is not a duration; write e.g. 90s, 20m, 1h30m or seconds");
    let t = text.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = 0u64;
    let mut num = String::new();
    for c in t.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: u64 = num.parse().map_err(|_| err())?;
        num.clear();
        total += n * match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(err()),
        };
    }
    if !num.is_empty() || total == 0 {
        return Err(err());
    }
    Ok(Duration::from_secs(total))
}

/// `4.2 s`, `3 min 05 s`.
pub fn show(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1} s")
    } else {
        let whole = d.as_secs();
        format!("{} min {:02} s", whole / 60, whole % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("20m"), Ok(Duration::from_secs(1200)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("45"), Ok(Duration::from_secs(45)));
        assert!(parse("5x").is_err());
        assert!(parse("m").is_err());
        assert!(parse("10m5").is_err());
        assert_eq!(show(Duration::from_millis(4200)), "4.2 s");
        assert_eq!(show(Duration::from_secs(185)), "3 min 05 s");
    }
}
