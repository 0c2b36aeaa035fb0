//! Schedules in words: [`Schedule::describe`](crate::Schedule::describe).
//!
//! The description is built from the strictly parsed fields, so every construct of the dialect
//! has its own words (see the examples of [`Schedule::describe`](crate::Schedule::describe)).

use std::time::Duration;

use crate::cron::{Field, Item, Kind, Parsed};

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
const WEEKDAYS: [&str; 8] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const NTH: [&str; 6] = ["", "first", "second", "third", "fourth", "fifth"];

/// An interval in words: "every 30 seconds", "every minute", "every 1h 30m".
pub(crate) fn interval(interval: Duration) -> String {
    let units = [
        (86_400, "day"),
        (3_600, "hour"),
        (60, "minute"),
        (1, "second"),
    ];
    if interval.subsec_nanos() == 0 {
        let secs = interval.as_secs();
        for (size, unit) in units {
            if secs.is_multiple_of(size) {
                return match secs / size {
                    1 => format!("every {unit}"),
                    n => format!("every {n} {unit}s"),
                };
            }
        }
    }
    if interval.subsec_nanos().is_multiple_of(1_000_000) && interval.as_secs() == 0 {
        return format!("every {} milliseconds", interval.subsec_millis());
    }
    format!("every {}", humantime::format_duration(interval))
}

/// A cron expression in words, without its time zone.
pub(crate) fn cron(parsed: &Parsed) -> String {
    let time = time(parsed);
    let days = days(parsed);
    let months = months(parsed.field(Kind::Month));
    let at_clock = time.starts_with("at ") && time[3..].starts_with(|c: char| c.is_ascii_digit());
    let mut text = time;
    match days {
        Days::Every if at_clock || months.is_some() => text.push_str(" every day"),
        Days::Every => {}
        Days::Phrase(phrase) => {
            text.push_str(&phrase);
        }
    }
    if let Some(months) = months {
        if !text.contains(" of the month") {
            text.push_str(&format!(" in {months}"));
        } else {
            text = text.replace(" of the month", &format!(" of {months}"));
        }
    }
    let year = parsed.field(Kind::Year);
    if !year.is_all() {
        text.push_str(&format!(" in {}", list(year, |i| item(Kind::Year, i))));
    }
    text
}

fn two(v: u32) -> String {
    format!("{v:02}")
}

fn single(field: &Field) -> Option<u32> {
    match field.items.as_slice() {
        [Item::Value(v)] => Some(*v),
        _ => None,
    }
}

/// `*/n` (or `*` with a step): every n units from the start of the range.
fn star_step(field: &Field) -> Option<u32> {
    match field.items.as_slice() {
        [Item::Range { step, .. }] if field.text.starts_with('*') => Some(*step),
        _ => None,
    }
}

fn plural(n: u32, unit: &str) -> String {
    if n == 1 {
        format!("every {unit}")
    } else {
        format!("every {n} {unit}s")
    }
}

/// The time of day: "at 02:30", "every 15 minutes from 09:00 through 17:45", ...
fn time(parsed: &Parsed) -> String {
    let (s, m, h) = (
        parsed.field(Kind::Second),
        parsed.field(Kind::Minute),
        parsed.field(Kind::Hour),
    );
    let clock = |h: u32, m: u32, s: u32| {
        if s == 0 {
            format!("{}:{}", two(h), two(m))
        } else {
            format!("{}:{}:{}", two(h), two(m), two(s))
        }
    };
    if let (Some(sv), Some(mv), Some(hv)) = (single(s), single(m), single(h)) {
        return format!("at {}", clock(hv, mv, sv));
    }
    // A few times of day: list them.
    if let (Some(sv), false, false) = (single(s), m.starts_with_star(), h.starts_with_star()) {
        let (minutes, hours) = (m.plain_values(), h.plain_values());
        if let (Some(minutes), Some(hours)) = (minutes, hours) {
            if minutes.len() * hours.len() <= 4 {
                let times: Vec<String> = hours
                    .iter()
                    .flat_map(|hv| minutes.iter().map(move |mv| (*hv, *mv)))
                    .map(|(hv, mv)| clock(hv, mv, sv))
                    .collect();
                return format!("at {}", and(&times));
            }
        }
    }
    let seconds = if single(s) == Some(0) {
        None
    } else if s.is_all() {
        Some("every second".to_owned())
    } else if let Some(step) = star_step(s) {
        Some(plural(step, "second"))
    } else if let Some(v) = single(s) {
        Some(format!("at second {v}"))
    } else {
        Some(format!("at seconds {}", list(s, |i| item(Kind::Second, i))))
    };
    let every_seconds = seconds.as_deref().is_some_and(|p| p.starts_with("every"));
    let minutes = if m.is_all() {
        match &seconds {
            None => Some("every minute".to_owned()),
            Some(_) if every_seconds => None,
            Some(_) => Some("of every minute".to_owned()),
        }
    } else if let Some(step) = star_step(m) {
        Some(plural(step, "minute"))
    } else if let Some(v) = single(m) {
        Some(format!("at minute {v}"))
    } else {
        Some(format!("at minutes {}", list(m, |i| item(Kind::Minute, i))))
    };
    let every_minutes = minutes
        .as_deref()
        .is_some_and(|p| p.starts_with("every") || p == "of every minute")
        || (minutes.is_none() && every_seconds);
    let first_last = m
        .plain_values()
        .and_then(|v| Some((*v.first()?, *v.last()?)));
    let hours = if h.is_all() {
        (!every_minutes).then(|| "past every hour".to_owned())
    } else {
        match (h.items.as_slice(), first_last, every_minutes) {
            ([Item::Value(a)], Some((first, last)), true)
            | (
                [Item::Range {
                    start: a, step: 1, ..
                }],
                Some((first, last)),
                true,
            ) if !h.starts_with_star() => {
                let b = match h.items.as_slice() {
                    [Item::Range { end, .. }] => *end,
                    _ => *a,
                };
                Some(format!(
                    "from {} through {}",
                    clock(*a, first, 0),
                    clock(b, last, 0)
                ))
            }
            _ => Some(match star_step(h) {
                Some(step) => format!("past {}", plural(step, "hour")),
                None => format!("past {}", list(h, |i| item(Kind::Hour, i))),
            }),
        }
    };
    let parts: Vec<String> = [seconds, minutes, hours].into_iter().flatten().collect();
    parts.join(" ")
}

enum Days {
    Every,
    Phrase(String),
}

/// The days: " on the last weekday of the month", ", Monday to Friday", ...
fn days(parsed: &Parsed) -> Days {
    let dom = parsed.field(Kind::DayOfMonth);
    let dow = parsed.field(Kind::DayOfWeek);
    let dom_free = dom.is_all() && dom.items.len() == 1;
    let dow_free = dow.is_all() && dow.items.len() == 1;
    match (dom_free, dow_free) {
        (true, true) => Days::Every,
        (false, true) => Days::Phrase(format!(" on {}", month_days(dom))),
        (true, false) => Days::Phrase(weekdays(dow)),
        (false, false) => {
            let days = month_days(dom);
            let weekdays = weekdays(dow);
            let weekdays = weekdays.trim_start_matches(", ").trim_start_matches(" on ");
            if parsed.dom_and_dow() {
                Days::Phrase(format!(" on {days} if it is {weekdays}"))
            } else {
                Days::Phrase(format!(" on {days} and on {weekdays}"))
            }
        }
    }
}

fn month_days(dom: &Field) -> String {
    if let Some(step) = star_step(dom) {
        return if step == 1 {
            "every day of the month".to_owned()
        } else {
            format!("every {} day of the month", ordinal(step))
        };
    }
    let words: Vec<String> = dom
        .items
        .iter()
        .map(|i| match *i {
            Item::All => "every day".to_owned(),
            Item::Value(d) => format!("the {}", ordinal(d)),
            Item::Range {
                start,
                end,
                step: 1,
            } => format!("the {} through the {}", ordinal(start), ordinal(end)),
            Item::Range { start, end, step } => format!(
                "every {} day from the {} through the {}",
                ordinal(step),
                ordinal(start),
                ordinal(end)
            ),
            Item::Last => "the last day".to_owned(),
            Item::LastMinus(1) => "the second-to-last day".to_owned(),
            Item::LastMinus(n) => format!("the {}-to-last day", ordinal(n + 1)),
            Item::LastWeekday => "the last weekday".to_owned(),
            Item::NearestWeekday(d) => format!("the weekday nearest the {}", ordinal(d)),
            Item::Nth { .. } | Item::LastOf(_) => i.canonical(),
        })
        .collect();
    format!("{} of the month", and(&words))
}

fn weekdays(dow: &Field) -> String {
    if let Some(step) = star_step(dow) {
        return format!(" on every {} day of the week from Sunday", ordinal(step));
    }
    let name = |d: u32| WEEKDAYS.get(d as usize).copied().unwrap_or("?");
    let only_ranges = dow
        .items
        .iter()
        .all(|i| matches!(i, Item::Range { step: 1, .. }));
    let words: Vec<String> = dow
        .items
        .iter()
        .map(|i| match *i {
            Item::All => "every day".to_owned(),
            Item::Value(d) => name(d).to_owned(),
            Item::Range {
                start,
                end,
                step: 1,
            } => format!("{} to {}", name(start), name(end)),
            Item::Range { start, end, step } => format!(
                "every {} day from {} to {}",
                ordinal(step),
                name(start),
                name(end)
            ),
            Item::Nth { day, nth } => format!(
                "the {} {} of the month",
                NTH.get(nth as usize).copied().unwrap_or("?"),
                name(day)
            ),
            Item::LastOf(day) => format!("the last {} of the month", name(day)),
            other => other.canonical(),
        })
        .fold(Vec::new(), |mut unique, word| {
            // `0,7` names Sunday twice.
            if !unique.contains(&word) {
                unique.push(word);
            }
            unique
        });
    if only_ranges {
        format!(", {}", and(&words))
    } else {
        format!(" on {}", and(&words))
    }
}

fn months(field: &Field) -> Option<String> {
    if field.is_all() && field.items.len() == 1 {
        return None;
    }
    if let Some(step) = star_step(field) {
        return Some(format!("every {} month from January", ordinal(step)));
    }
    Some(list(field, |i| item(Kind::Month, i)))
}

/// One item of a time, month or year field.
fn item(kind: Kind, item: &Item) -> String {
    let show = |v: u32| match kind {
        Kind::Month => MONTHS
            .get(v.wrapping_sub(1) as usize)
            .copied()
            .unwrap_or("?")
            .to_owned(),
        Kind::Hour => format!("{}:00", two(v)),
        _ => v.to_string(),
    };
    let unit = match kind {
        Kind::Second => "second",
        Kind::Minute => "minute",
        Kind::Hour => "hour",
        Kind::Month => "month",
        _ => "year",
    };
    match *item {
        Item::All => format!("every {unit}"),
        Item::Value(v) => show(v),
        Item::Range {
            start,
            end,
            step: 1,
        } => format!("{} through {}", show(start), show(end)),
        Item::Range { start, end, step } => format!(
            "every {} {unit} from {} through {}",
            ordinal(step),
            show(start),
            show(end)
        ),
        other => other.canonical(),
    }
}

fn list(field: &Field, each: impl Fn(&Item) -> String) -> String {
    let words: Vec<String> = field.items.iter().map(each).collect();
    and(&words)
}

/// "a", "a and b", "a, b and c".
fn and(words: &[String]) -> String {
    match words {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}
