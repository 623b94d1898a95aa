//! Dates recorded in profiles and plans: UTC days, `YYYY-MM-DD`, without a date library.

/// Today's UTC date, `YYYY-MM-DD`.
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    date_of(secs)
}

/// UTC date of a Unix time (Hinnant's civil-from-days, proleptic Gregorian).
pub fn date_of(secs: u64) -> String {
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_from_unix_time() {
        assert_eq!(date_of(0), "1970-01-01");
        // 2000-02-29 00:00 UTC = 11016 days = 951,782,400 s (a leap day of a 400-year leap year).
        assert_eq!(date_of(951_782_400), "2000-02-29");
        // 2026-11-22 = 20,779 days after the epoch.
        assert_eq!(date_of(20_779 * 86_400 + 3_600), "2026-11-22");
    }
}
