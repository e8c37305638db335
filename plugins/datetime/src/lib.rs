//! Dates and times for agents, which are notoriously bad at calendar maths.
//!
//! - `CurrentTime`: now, in UTC (WASI's wall clock; no permission needed).
//! - `DaysBetween`: whole days from one date to another, with weekdays.
//! - `AddDays`: a date plus or minus a number of days.
//!
//! Dates are proleptic Gregorian `YYYY-MM-DD`; the arithmetic is Howard
//! Hinnant's days-from-civil algorithm, exact for every year in range.

use gadget_sdk::{Context, Example, Gadget, GadgetError, NoParams, Outcome, json};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::{SystemTime, UNIX_EPOCH};

/// Years outside this range are refused, keeping every intermediate value
/// far from overflow and every date printable as four digits.
const MIN_YEAR: i64 = 1;
const MAX_YEAR: i64 = 9999;

const WEEKDAYS: [&str; 7] = [
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
];

/// Days since 1970-01-01 for a civil date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn weekday(days: i64) -> &'static str {
    WEEKDAYS[days.rem_euclid(7) as usize]
}

fn format_date(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

fn parse_date(field: &str, text: &str) -> Result<i64, GadgetError> {
    let bad = || {
        GadgetError::invalid_arguments(format!(
            "{field} '{text}' is not a date in YYYY-MM-DD form, such as 2024-02-29"
        ))
    };
    let mut parts = text.trim().splitn(3, '-');
    let mut next = || {
        parts
            .next()
            .and_then(|p| p.parse::<i64>().ok())
            .ok_or_else(bad)
    };
    let (y, m, d) = (next()?, next()?, next()?);
    if !(MIN_YEAR..=MAX_YEAR).contains(&y) || !(1..=12).contains(&m) || d < 1 {
        return Err(bad());
    }
    let days = days_from_civil(y, m, d);
    // Reject 2023-02-30 and friends: the date must survive a round trip.
    if civil_from_days(days) != (y, m, d) {
        return Err(GadgetError::invalid_arguments(format!(
            "{field} '{text}' does not exist in the calendar"
        )));
    }
    Ok(days)
}

fn in_range(days: i64) -> Result<i64, GadgetError> {
    let (y, _, _) = civil_from_days(days);
    if (MIN_YEAR..=MAX_YEAR).contains(&y) {
        Ok(days)
    } else {
        Err(GadgetError::invalid_arguments(format!(
            "the result falls outside the years {MIN_YEAR} to {MAX_YEAR}"
        )))
    }
}

struct CurrentTime;

impl Gadget for CurrentTime {
    type Params = NoParams;
    const NAME: &'static str = "CurrentTime";
    const LABEL: Option<&'static str> = Some("Current time");
    const DESCRIPTION: &'static str =
        "Returns the current date and time in UTC (ISO 8601), the weekday and the Unix time.";

    fn examples() -> Vec<Example> {
        vec![Example::new(json!({})).output("2026-11-21T14:16:05Z (Saturday), unix 1795270565")]
    }

    fn invoke(_params: NoParams, _ctx: &Context) -> Result<Outcome, GadgetError> {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|_| GadgetError::failed("the clock reads earlier than 1970"))?;
        let secs = since_epoch.as_secs() as i64;
        let days = secs.div_euclid(86_400);
        let in_day = secs.rem_euclid(86_400);
        let text = format!(
            "{}T{:02}:{:02}:{:02}Z ({}), unix {secs}",
            format_date(days),
            in_day / 3600,
            in_day % 3600 / 60,
            in_day % 60,
            weekday(days)
        );
        Ok(Outcome::result(text).with_details(json!({ "unix": secs })))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct BetweenParams {
    /// The start date, YYYY-MM-DD.
    from: String,
    /// The end date, YYYY-MM-DD.
    to: String,
}

struct DaysBetween;

impl Gadget for DaysBetween {
    type Params = BetweenParams;
    const NAME: &'static str = "DaysBetween";
    const LABEL: Option<&'static str> = Some("Days between dates");
    const DESCRIPTION: &'static str = "Counts the days from one date to another (negative when `to` is earlier) and names both weekdays.";

    fn examples() -> Vec<Example> {
        vec![
            Example::new(json!({ "from": "2024-02-01", "to": "2024-03-01" }))
                .output("29 days from 2024-02-01 (Thursday) to 2024-03-01 (Friday)"),
        ]
    }

    fn invoke(params: BetweenParams, _ctx: &Context) -> Result<Outcome, GadgetError> {
        let from = parse_date("from", &params.from)?;
        let to = parse_date("to", &params.to)?;
        let diff = to - from;
        Ok(Outcome::result(format!(
            "{diff} day{} from {} ({}) to {} ({})",
            if diff.abs() == 1 { "" } else { "s" },
            format_date(from),
            weekday(from),
            format_date(to),
            weekday(to)
        ))
        .with_details(json!({ "days": diff })))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct AddParams {
    /// The date to start from, YYYY-MM-DD.
    date: String,
    /// Days to add; negative to go back.
    days: i32,
}

struct AddDays;

impl Gadget for AddDays {
    type Params = AddParams;
    const NAME: &'static str = "AddDays";
    const LABEL: Option<&'static str> = Some("Add days to a date");
    const DESCRIPTION: &'static str = "Adds a number of days (negative to subtract) to a date and returns the new date and its weekday.";

    fn examples() -> Vec<Example> {
        vec![Example::new(json!({ "date": "2024-02-28", "days": 2 })).output("2024-03-01 (Friday)")]
    }

    fn invoke(params: AddParams, _ctx: &Context) -> Result<Outcome, GadgetError> {
        let start = parse_date("date", &params.date)?;
        let days = in_range(start + i64::from(params.days))?;
        Ok(format!("{} ({})", format_date(days), weekday(days)).into())
    }
}

/// The longest wait `Sleep` accepts, in milliseconds: ten minutes, the
/// host's ceiling for any timeout.
const MAX_SLEEP_MS: u64 = 600_000;

/// How often `Sleep` wakes to check the abort signal, in milliseconds: a
/// cancelled wait ends within this.
const SLEEP_SLICE_MS: u64 = 10;

#[derive(Debug, Deserialize, JsonSchema)]
struct SleepParams {
    /// How long to wait, in milliseconds (at most 600000).
    ms: u64,
}

struct Sleep;

impl Gadget for Sleep {
    type Params = SleepParams;
    const NAME: &'static str = "Sleep";
    const LABEL: Option<&'static str> = Some("Wait");
    const DESCRIPTION: &'static str = "Waits the given number of milliseconds, then says how long it waited. Useful to pace work or to wait for something outside to change. Stops early, with an error, when its 3-second deadline passes.";
    const TIMEOUT_MS: Option<u32> = Some(3_000);

    fn examples() -> Vec<Example> {
        vec![Example::new(json!({ "ms": 250 })).output("slept 250 ms")]
    }

    fn invoke(params: SleepParams, ctx: &Context) -> Result<Outcome, GadgetError> {
        if params.ms > MAX_SLEEP_MS {
            return Err(GadgetError::invalid_arguments(format!(
                "ms must be at most {MAX_SLEEP_MS}, got {}",
                params.ms
            )));
        }
        let started = std::time::Instant::now();
        let total = std::time::Duration::from_millis(params.ms);
        let mut next_progress = std::time::Duration::from_secs(1);
        while started.elapsed() < total {
            ctx.check_cancelled()?;
            let elapsed = started.elapsed();
            if elapsed >= next_progress {
                ctx.progress(format!("{} of {} ms", elapsed.as_millis(), params.ms));
                next_progress += std::time::Duration::from_secs(1);
            }
            let slice = std::time::Duration::from_millis(SLEEP_SLICE_MS);
            std::thread::sleep(slice.min(total.saturating_sub(elapsed)));
        }
        Ok(format!("slept {} ms", params.ms).into())
    }
}

gadget_sdk::export_gadgets!(CurrentTime, DaysBetween, AddDays, Sleep);
