//! Clock and calendar: Unix seconds now, and a Unix hour as a UTC date
//! (the dashboard's axes and `webtune db compact`'s day names).

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since 1970-01-01 UTC (0 if the clock is before it).
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// A Unix hour as UTC (year, month, day, hour).
pub fn utc(unix_hour: i64) -> (i64, u32, u32, u32) {
    let days = unix_hour.div_euclid(24);
    let hour = unix_hour.rem_euclid(24) as u32;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, hour)
}
