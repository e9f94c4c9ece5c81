//! Times as the control plane stores them in SQLite: SQLAlchemy's text form
//! `YYYY-MM-DD HH:MM:SS.ffffff`, from unix seconds rounded to the millisecond exactly as SQLite's
//! `strftime('%Y-%m-%d %H:%M:%f', x, 'unixepoch') || '000'` rounds them (the form Python's path
//! stores). The core formats them itself: that `strftime` per row, and its parse again in the
//! rollup, were about a tenth of the ledger's CPU per event (bench/README.md). Both paths then
//! store the same text and put a row in the same rollup bucket.

/// The unix epoch as SQLite's Julian day number, in milliseconds.
const EPOCH_JD_MS: i64 = 210_866_760_000_000;
/// The first Julian-day millisecond past SQLite's dates (year 10000).
const JD_MS_END: f64 = 464_269_060_800_000.0;
const DAY_MS: i64 = 86_400_000;

/// The length of the text form.
pub const TEXT_LEN: usize = 26;

/// Unix milliseconds of `seconds`, rounded as SQLite rounds them (its Julian-day arithmetic in a
/// double, then half up); `None` for a time before 1970 (never a request's start), past year
/// 9999 or not a number: the caller refuses the batch and its other path stores such a row as
/// it always did.
pub fn unix_millis(seconds: f64) -> Option<i64> {
    #[allow(clippy::cast_precision_loss)] // exact: below 2^53
    let r = seconds * 1000.0 + EPOCH_JD_MS as f64;
    #[allow(clippy::cast_precision_loss)]
    let in_range = r >= EPOCH_JD_MS as f64 && r < JD_MS_END; // false for NaN
    #[allow(clippy::cast_possible_truncation)] // in range: below 2^49
    in_range.then(|| (r + 0.5) as i64 - EPOCH_JD_MS)
}

/// `YYYY-MM-DD HH:MM:SS.mmm000` of `ms`, unix milliseconds from `unix_millis`.
pub fn format_millis(ms: i64) -> [u8; TEXT_LEN] {
    let days = ms.div_euclid(DAY_MS);
    let in_day = ms.rem_euclid(DAY_MS);
    let (year, month, day) = civil_from_days(days);
    let mut out = *b"0000-00-00 00:00:00.000000";
    put(&mut out[0..4], year);
    put(&mut out[5..7], month);
    put(&mut out[8..10], day);
    put(&mut out[11..13], in_day / 3_600_000);
    put(&mut out[14..16], in_day / 60_000 % 60);
    put(&mut out[17..19], in_day / 1000 % 60);
    put(&mut out[20..23], in_day % 1000);
    out
}

/// The digits of `value` into `into`, zero-padded on the left.
fn put(into: &mut [u8], mut value: i64) {
    for digit in into.iter_mut().rev() {
        // 0..=9: the cast cannot truncate.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let d = value.rem_euclid(10) as u8;
        *digit = b'0' + d;
        value /= 10;
    }
}

/// The proleptic Gregorian date of a count of days since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::rows::Scalar;
    use crate::ledger::sqlite::{Connection, Library, Step};

    fn text(seconds: f64) -> Option<String> {
        unix_millis(seconds).map(|ms| String::from_utf8(format_millis(ms).to_vec()).expect("ascii"))
    }

    #[test]
    fn known_times_format_as_sqlalchemy_stores_them() {
        assert_eq!(text(0.0).as_deref(), Some("1970-01-01 00:00:00.000000"));
        assert_eq!(text(1_796_300_000.25).as_deref(), Some("2026-12-03 12:13:20.250000"));
        assert_eq!(text(951_782_400.0).as_deref(), Some("2000-02-29 00:00:00.000000"));
        // Half a millisecond rounds up, across a minute's edge too.
        assert_eq!(text(1_796_300_039.999_5).as_deref(), Some("2026-12-03 12:14:00.000000"));
        assert_eq!(text(253_402_300_799.999).as_deref(), Some("9999-12-31 23:59:59.999000"));
        for outside in [-0.5, -1e9, 253_402_300_800.0, f64::NAN, f64::INFINITY] {
            assert_eq!(text(outside), None, "{outside}");
        }
    }

    /// The same text as SQLite's own `strftime` for times all over the range, and near the
    /// rounding edges of a millisecond.
    #[test]
    fn every_time_formats_as_sqlites_strftime() {
        let lib = Library::system().expect("the system's libsqlite3.so.0 (Debian's libsqlite3-0)");
        let mut conn = Connection::open(lib, ":memory:").expect("open");
        let mut query = conn
            .prepare("SELECT strftime('%Y-%m-%d %H:%M:%f', ?, 'unixepoch') || '000', strftime('%s', ?)")
            .expect("prepare");
        let mut rng = fastrand::Rng::with_seed(7);
        for i in 0..20_000 {
            let seconds = match i % 4 {
                0 => rng.f64() * 253_402_300_799.0,
                1 => 1.7e9 + rng.f64() * 1e8,
                // Near a half millisecond.
                2 => (1.7e9 + f64::from(rng.u32(..1_000_000))) + f64::from(rng.u32(..1000)) / 1000.0 + 0.0005,
                _ => f64::from(rng.u32(..)) + f64::from(rng.u32(..1000)) / 1000.0 - 0.0005,
            };
            query.bind(1, &Scalar::Float(seconds)).expect("bind");
            let ours = text(seconds).expect("in range");
            query.bind(2, &Scalar::Text(ours.clone().into())).expect("bind");
            assert_eq!(query.step().expect("step"), Step::Row);
            assert_eq!(query.column_text(0), ours, "{seconds}");
            let ms = unix_millis(seconds).expect("in range");
            assert_eq!(query.column_i64(1), ms.div_euclid(1000), "whole seconds of {seconds}");
            query.reset();
        }
    }
}
