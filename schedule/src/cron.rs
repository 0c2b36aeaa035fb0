//! The cron grammar: strict validation, normalisation, and the one croner configuration.
//!
//! croner is lenient (it replaces names anywhere in the text, skips empty list items, accepts `+`
//! in the day-of-week field, …), so every expression is first parsed here against the strict
//! Vixie/cronie dialect (docs/guide/fires.md). The result is rewritten into a canonical, purely
//! numeric 7-field form (`sec min hour dom mon dow year`) and only that form is handed to croner,
//! through [`croner_parser`], which both [`validate_cron`] and the runtime use.
//!
//! The accepted dialect and the decisions taken beyond it are documented on the crate root.

use std::collections::BTreeSet;

use chrono::{NaiveDate, NaiveDateTime};
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

use crate::CronError;

/// The smallest year the 7th field accepts.
pub const YEAR_MIN: u32 = 1970;
/// The largest year the 7th field accepts.
pub const YEAR_MAX: u32 = 2199;

const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const MONTH_LONG_NAMES: [&str; 12] = [
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
const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

const ALIASES: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

/// A validated cron expression.
///
/// Holds the expression as written, the canonical numeric 7-field form evaluated by croner, and the
/// facts the time-zone layer needs (whether the job is a wildcard job in cronie's sense).
#[derive(Debug, Clone)]
pub struct CronExpr {
    pub(crate) source: String,
    pub(crate) canonical: String,
    /// The croner patterns whose union is the schedule: one, or one per month length when the
    /// day-of-month field uses `L-N` (croner has no `L-N`; see [`month_length_patterns`]).
    pub(crate) crons: Vec<Cron>,
    pub(crate) wildcard: bool,
    pub(crate) parsed: Parsed,
}

impl CronExpr {
    /// Parses and validates an expression (5, 6 or 7 fields, or an alias such as `@daily`).
    ///
    /// Fails with a [`CronError`] whose reason names the field, the item and what is valid; an
    /// expression that can never fire (such as `0 0 30 2 *`) is rejected too.
    pub fn parse(expr: &str) -> Result<Self, CronError> {
        let parsed = parse_strict(expr).map_err(|e| e.located_in(expr))?;
        let canonical = parsed.canonical();
        let crons = month_length_patterns(&parsed)
            .iter()
            .map(|(pattern, dom_and_dow)| {
                croner_parser(*dom_and_dow).parse(pattern).map_err(|e| {
                    CronError::new(format!(
                        "the expression is not supported by the evaluator: {}",
                        e.to_string().to_lowercase().trim_end_matches('.')
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        check_fires(&crons, &parsed)?;
        Ok(CronExpr {
            source: expr.to_owned(),
            canonical,
            wildcard: parsed.is_wildcard(),
            crons,
            parsed,
        })
    }

    /// The first scheduled wall-clock time after `from` (or at it, when `inclusive`).
    pub(crate) fn next_naive(
        &self,
        from: &NaiveDateTime,
        inclusive: bool,
    ) -> Option<NaiveDateTime> {
        self.crons
            .iter()
            .filter_map(|cron| cron.find_next_occurrence(from, inclusive).ok())
            .min()
    }

    /// The last scheduled wall-clock time before `from` (or at it, when `inclusive`).
    pub(crate) fn previous_naive(
        &self,
        from: &NaiveDateTime,
        inclusive: bool,
    ) -> Option<NaiveDateTime> {
        self.crons
            .iter()
            .filter_map(|cron| cron.find_previous_occurrence(from, inclusive).ok())
            .max()
    }

    /// The expression as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The canonical form that is evaluated: 7 numeric fields, seconds first and year last, with
    /// names, aliases and `?` replaced (for example `@daily` becomes `0 0 0 * * * *`). `L-N` stays
    /// as it is (`L-0` becomes `L`); it is evaluated as one pattern per month length.
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The shortest time between two wall-clock times the expression matches: the smallest step,
    /// wrapping round, of the finest of the seconds, minutes and hours fields that selects more
    /// than one value, or one day when each of them selects one. A lower bound: the day, month and
    /// year fields only take times away.
    pub(crate) fn shortest_wall_gap(&self) -> std::time::Duration {
        let fields = [
            (Kind::Second, 1, 60),
            (Kind::Minute, 60, 60),
            (Kind::Hour, 60 * 60, 24),
        ];
        for (kind, unit, cycle) in fields {
            let Some(values) = self.parsed.field(kind).plain_values() else {
                // Never for these fields (no `L` or `#`); one second is the safe answer.
                return std::time::Duration::from_secs(1);
            };
            let (Some(&first), Some(&last)) = (values.first(), values.last()) else {
                continue;
            };
            if first == last {
                continue;
            }
            let wrap = cycle - last + first;
            let step = values
                .iter()
                .zip(values.iter().skip(1))
                .map(|(a, b)| b - a)
                .fold(wrap, u32::min);
            return std::time::Duration::from_secs(u64::from(step) * unit);
        }
        std::time::Duration::from_secs(24 * 60 * 60)
    }

    /// Whether this is a *wildcard* job in cronie's sense: its minute or hour field starts with
    /// `*` (this includes `@hourly`). Every other job is *fixed-time*; the seconds field does not
    /// change the class. The class decides what happens at daylight-saving transitions.
    pub fn is_wildcard(&self) -> bool {
        self.wildcard
    }
}

/// Checks a cron expression with exactly the rules the runtime uses.
pub fn validate_cron(expr: &str) -> Result<(), CronError> {
    CronExpr::parse(expr).map(|_| ())
}

/// The one croner configuration, used by validation and by the runtime alike.
///
/// The input is always the canonical 7-field form, so seconds and year are required; `sloppy_ranges`
/// (`5/15`) stays off. `dom_and_dow` is set when one of the day fields starts with `*` or `?`
/// (cronie's rule: such a field is unrestricted, so the other one decides alone — which for a
/// field like `*/2` means both must match); otherwise a day matches if either field matches.
pub(crate) fn croner_parser(dom_and_dow: bool) -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Required)
        .year(Year::Required)
        .dom_and_dow(dom_and_dow)
        .alternative_weekdays(false)
        .sloppy_ranges(false)
        .build()
}

/// Rejects an expression that never fires, by asking croner for the first occurrence on naive
/// time from 1970-01-01 (within croner's own search limit, the year 5000).
fn check_fires(crons: &[Cron], parsed: &Parsed) -> Result<(), CronError> {
    let reference =
        NaiveDate::from_ymd_opt(YEAR_MIN as i32, 1, 1).and_then(|d| d.and_hms_opt(0, 0, 0));
    let Some(reference) = reference else {
        return Ok(());
    };
    // The common case needs no search: days that no selected month has.
    if let Some(reason) = parsed.impossible_days() {
        return Err(CronError::new(format!(
            "the expression never fires: {reason}"
        )));
    }
    if crons
        .iter()
        .any(|cron| cron.find_next_occurrence(&reference, true).is_ok())
    {
        return Ok(());
    }
    Err(CronError::new(format!(
        "the expression never fires: {}",
        parsed.why_never()
    )))
}

/// The numeric 7-field patterns (with their `dom_and_dow` flag) whose union is the expression.
///
/// Without `L-N` that is the canonical form alone. croner has no `L-N`, so an expression with it
/// becomes one pattern per month length — 31-day months, 30-day months, February in common years
/// and February in leap years — with each `L-N` written as the day it names in those months. A
/// day before the 1st is left out (that month has no fire from it); a pattern left without any
/// day-of-month item matches by its day-of-week field alone when that field is restricted (the
/// OR rule), and is dropped otherwise.
fn month_length_patterns(parsed: &Parsed) -> Vec<(String, bool)> {
    let dom = parsed.field(Kind::DayOfMonth);
    if !dom.items.iter().any(|i| matches!(i, Item::LastMinus(_))) || dom.is_all() {
        return vec![(parsed.canonical(), parsed.dom_and_dow())];
    }
    let months = parsed
        .field(Kind::Month)
        .plain_values()
        .unwrap_or_else(|| (1..=12).collect());
    let year = parsed.field(Kind::Year);
    let years: BTreeSet<u32> = if year.is_all() {
        (1..=5000).collect()
    } else {
        year.plain_values().unwrap_or_default()
    };
    let leap = |y: &u32| (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
    let partitions: [(u32, Vec<u32>, Option<bool>); 4] = [
        (31, vec![1, 3, 5, 7, 8, 10, 12], None),
        (30, vec![4, 6, 9, 11], None),
        (28, vec![2], Some(false)),
        (29, vec![2], Some(true)),
    ];
    let mut patterns = Vec::new();
    for (length, partition, leap_years) in partitions {
        let selected: Vec<String> = partition
            .iter()
            .filter(|m| months.contains(m))
            .map(u32::to_string)
            .collect();
        if selected.is_empty() {
            continue;
        }
        let year_text = match leap_years {
            None => year.canonical(),
            Some(wanted) => {
                let set: BTreeSet<u32> = years
                    .iter()
                    .copied()
                    .filter(|y| leap(y) == wanted)
                    .collect();
                if set.is_empty() {
                    continue;
                }
                compress_years(set)
            }
        };
        let days: Vec<String> = dom
            .items
            .iter()
            .filter_map(|item| match *item {
                Item::LastMinus(n) => (n < length).then(|| (length - n).to_string()),
                other => Some(other.canonical()),
            })
            .collect();
        let (dom_text, dom_and_dow) = if days.is_empty() {
            if parsed.dom_and_dow() {
                continue; // the day-of-month field decides alone, and selects nothing here
            }
            ("*".to_owned(), true)
        } else {
            (days.join(","), parsed.dom_and_dow())
        };
        let field = |kind: Kind| parsed.field(kind).canonical();
        patterns.push((
            format!(
                "{} {} {} {dom_text} {} {} {year_text}",
                field(Kind::Second),
                field(Kind::Minute),
                field(Kind::Hour),
                selected.join(","),
                field(Kind::DayOfWeek),
            ),
            dom_and_dow,
        ));
    }
    patterns
}

/// A set of years as a short list of croner items: runs of years 4 apart become `A-B/4`.
fn compress_years(mut years: BTreeSet<u32>) -> String {
    let mut items = Vec::new();
    while let Some(first) = years.pop_first() {
        let mut last = first;
        let mut run = vec![first];
        while years.contains(&(last + 4)) {
            last += 4;
            run.push(last);
        }
        if run.len() >= 3 {
            for y in &run[1..] {
                years.remove(y);
            }
            items.push(format!("{first}-{last}/4"));
        } else {
            items.push(first.to_string());
        }
    }
    items.join(",")
}

// ---------------------------------------------------------------------------------------------
// Fields and items
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
    Year,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Second => "second",
            Kind::Minute => "minute",
            Kind::Hour => "hour",
            Kind::DayOfMonth => "day-of-month",
            Kind::Month => "month",
            Kind::DayOfWeek => "day-of-week",
            Kind::Year => "year",
        }
    }

    fn bounds(self) -> (u32, u32) {
        match self {
            Kind::Second | Kind::Minute => (0, 59),
            Kind::Hour => (0, 23),
            Kind::DayOfMonth => (1, 31),
            Kind::Month => (1, 12),
            Kind::DayOfWeek => (0, 7),
            Kind::Year => (YEAR_MIN, YEAR_MAX),
        }
    }

    fn valid_values(self) -> String {
        let (min, max) = self.bounds();
        match self {
            Kind::Month => format!("{min}-{max} or `JAN`-`DEC`"),
            Kind::DayOfWeek => format!("{min}-{max} or `SUN`-`SAT`, 0 and 7 are Sunday"),
            _ => format!("{min}-{max}"),
        }
    }

    fn is_day(self) -> bool {
        matches!(self, Kind::DayOfMonth | Kind::DayOfWeek)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Item {
    /// `*` or `?`.
    All,
    /// `N`.
    Value(u32),
    /// `N-M`, `*/S` or `N-M/S` (step 1 for a plain range).
    Range { start: u32, end: u32, step: u32 },
    /// `L` in the day-of-month field.
    Last,
    /// `LW` in the day-of-month field.
    LastWeekday,
    /// `L-N` in the day-of-month field: N (1-30) days before the last day of the month.
    LastMinus(u32),
    /// `NW` in the day-of-month field.
    NearestWeekday(u32),
    /// `D#N` in the day-of-week field.
    Nth { day: u32, nth: u32 },
    /// `DL` in the day-of-week field.
    LastOf(u32),
}

impl Item {
    pub(crate) fn canonical(self) -> String {
        match self {
            Item::All => "*".to_owned(),
            Item::Value(v) => v.to_string(),
            Item::Range {
                start,
                end,
                step: 1,
            } => format!("{start}-{end}"),
            Item::Range { start, end, step } => format!("{start}-{end}/{step}"),
            Item::Last => "L".to_owned(),
            Item::LastWeekday => "LW".to_owned(),
            Item::LastMinus(n) => format!("L-{n}"),
            Item::NearestWeekday(d) => format!("{d}W"),
            Item::Nth { day, nth } => format!("{day}#{nth}"),
            Item::LastOf(d) => format!("{d}L"),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub(crate) kind: Kind,
    pub(crate) text: String,
    pub(crate) items: Vec<Item>,
}

impl Field {
    pub(crate) fn starts_with_star(&self) -> bool {
        self.text.starts_with('*') || self.text.starts_with('?')
    }

    pub(crate) fn is_all(&self) -> bool {
        self.items.contains(&Item::All)
    }

    fn canonical(&self) -> String {
        if self.is_all() {
            return "*".to_owned();
        }
        self.items
            .iter()
            .map(|i| i.canonical())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The plain values the field selects, or `None` when it uses `L`, `#` and the like.
    pub(crate) fn plain_values(&self) -> Option<BTreeSet<u32>> {
        let (min, max) = self.kind.bounds();
        let mut set = BTreeSet::new();
        for item in &self.items {
            match *item {
                Item::All => set.extend(min..=max),
                Item::Value(v) | Item::NearestWeekday(v) => {
                    set.insert(v);
                }
                Item::Range { start, end, step } => {
                    set.extend((start..=end).step_by(step.max(1) as usize));
                }
                _ => return None,
            }
        }
        Some(set)
    }
}

/// A strictly parsed expression: always 7 fields (seconds `0` and year `*` filled in).
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    pub(crate) fields: [Field; 7],
    /// Whether the expression was an alias (`@daily`), with the alias as written.
    pub(crate) alias: Option<String>,
}

impl Parsed {
    pub(crate) fn field(&self, kind: Kind) -> &Field {
        let index = match kind {
            Kind::Second => 0,
            Kind::Minute => 1,
            Kind::Hour => 2,
            Kind::DayOfMonth => 3,
            Kind::Month => 4,
            Kind::DayOfWeek => 5,
            Kind::Year => 6,
        };
        &self.fields[index]
    }

    fn canonical(&self) -> String {
        self.fields
            .iter()
            .map(Field::canonical)
            .collect::<Vec<_>>()
            .join(" ")
    }

    pub(crate) fn dom_and_dow(&self) -> bool {
        self.field(Kind::DayOfMonth).starts_with_star()
            || self.field(Kind::DayOfWeek).starts_with_star()
    }

    fn is_wildcard(&self) -> bool {
        self.field(Kind::Minute).text.starts_with('*')
            || self.field(Kind::Hour).text.starts_with('*')
    }

    /// The day-of-month field selects only days that none of the selected months has (and the
    /// day-of-week field does not add any day): a certain never-fire, found without a search.
    fn impossible_days(&self) -> Option<String> {
        let dom = self.field(Kind::DayOfMonth);
        if !self.field(Kind::DayOfWeek).is_all() {
            return None;
        }
        let days = dom.plain_values()?;
        let months = self.field(Kind::Month).plain_values()?;
        let longest = |m: u32| match m {
            2 => 29,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        if days.is_empty() || !days.iter().all(|d| months.iter().all(|m| *d > longest(*m))) {
            return None;
        }
        let month_list = join_or(
            months
                .iter()
                .filter_map(|m| MONTH_LONG_NAMES.get(m.wrapping_sub(1) as usize))
                .copied(),
        );
        Some(match days.iter().next() {
            Some(d) if days.len() == 1 => format!("day {d} never occurs in {month_list}"),
            _ => format!("none of the days `{}` occurs in {month_list}", dom.text),
        })
    }

    /// Explains why an expression never fires, as precisely as a simple look allows.
    fn why_never(&self) -> String {
        let dom = self.field(Kind::DayOfMonth);
        let dow = self.field(Kind::DayOfWeek);
        let year = self.field(Kind::Year);
        let days = dom.plain_values();
        let months = self.field(Kind::Month).plain_values();
        if let (Some(days), Some(months), true) = (days, months, dow.is_all()) {
            if !year.is_all() && days.iter().all(|d| *d == 29) && months.iter().all(|m| *m == 2) {
                return if year.items.len() == 1 && matches!(year.items[0], Item::Value(_)) {
                    format!("February 29 does not occur in {}", year.text)
                } else {
                    format!("February 29 does not occur in the years `{}`", year.text)
                };
            }
        }
        if year.is_all() {
            "no date matches all of its fields".to_owned()
        } else {
            format!(
                "no date in the years `{}` matches all of its fields",
                year.text
            )
        }
    }
}

fn join_or<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

// ---------------------------------------------------------------------------------------------
// The parser
// ---------------------------------------------------------------------------------------------

fn parse_strict(expr: &str) -> Result<Parsed, CronError> {
    check_characters(expr)?;
    let words = words(expr);
    let Some(&(alias_at, first)) = words.first() else {
        return Err(CronError::new(
            "the cron expression is empty; write 5, 6 or 7 fields (seconds first, year last) or an alias such as `@daily`",
        ));
    };
    if first.starts_with('@') {
        let alias = first;
        let expansion = ALIASES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(alias))
            .map(|(_, expansion)| *expansion);
        return match expansion {
            Some(_) if words.len() > 1 => {
                let (at, _) = words[1];
                let end = words.last().map_or(at, |(start, w)| start + w.len());
                Err(CronError::new(format!(
                    "the alias `{alias}` stands alone; remove the fields after it"
                ))
                .spanning(at, end - at))
            }
            Some(expansion) => {
                let mut parsed = parse_fields(&self::words(expansion))?;
                parsed.alias = Some(alias.to_owned());
                Ok(parsed)
            }
            None if alias.eq_ignore_ascii_case("@every") => Err(CronError::new(
                "`@every` is not a cron alias; for a fixed interval use `every = \"30s\"` (`@every 30s` is accepted where a whole schedule is read from one line of text)",
            )
            .spanning(alias_at, alias.len())),
            None if alias.eq_ignore_ascii_case("@reboot") => Err(CronError::new(
                "`@reboot` is not supported; use a fixed schedule such as `@daily`, or run the code at startup",
            )
            .spanning(alias_at, alias.len())),
            None => Err(CronError::new(format!(
                "unknown alias `{alias}`; use `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight` or `@hourly`"
            ))
            .spanning(alias_at, alias.len())),
        };
    }
    parse_fields(&words)
}

/// The fields of an expression with their byte offsets: separated by ASCII spaces and tabs only
/// (leading and trailing ones allowed).
fn words(expr: &str) -> Vec<(usize, &str)> {
    let mut words = Vec::new();
    let mut start = None;
    for (i, b) in expr.bytes().enumerate() {
        let separator = b == b' ' || b == b'\t';
        match (separator, start) {
            (true, Some(s)) => {
                words.push((s, &expr[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        words.push((s, &expr[s..]));
    }
    words
}

/// Rejects every character that is neither printable ASCII nor an ASCII space or tab, naming it
/// and its position: a pasted expression with a hidden character (a no-break space, a line
/// break, a full-width digit) must not silently mean something else.
fn check_characters(expr: &str) -> Result<(), CronError> {
    let Some((at, c)) = expr
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_graphic() || *c == ' ' || *c == '\t'))
    else {
        return Ok(());
    };
    let named = char_name(c);
    let message = if c.is_whitespace() || is_invisible(c) {
        format!(
            "{named} between the fields; separate fields with ASCII spaces or tabs only (an expression pasted from a document or chat can carry such a character: retype the spaces)"
        )
    } else if c.is_control() {
        format!(
            "{named} in the expression; remove it (fields are separated by ASCII spaces or tabs)"
        )
    } else {
        format!(
            "non-ASCII character `{c}` ({named}); digits and names are ASCII only, such as `0`-`9`, `JAN` or `MON`"
        )
    };
    Err(CronError::new(message).spanning(at, c.len_utf8()))
}

/// Characters that show as nothing but are not Unicode white space.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{180E}' | '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}'
    )
}

/// `U+00A0 NO-BREAK SPACE`: the code point, and the Unicode name of white-space, invisible and
/// common control characters.
fn char_name(c: char) -> String {
    let name = match c {
        '\u{0}' => "NULL",
        '\u{A}' => "LINE FEED",
        '\u{B}' => "LINE TABULATION (vertical tab)",
        '\u{C}' => "FORM FEED",
        '\u{D}' => "CARRIAGE RETURN",
        '\u{1B}' => "ESCAPE",
        '\u{7F}' => "DELETE",
        '\u{85}' => "NEXT LINE",
        '\u{A0}' => "NO-BREAK SPACE",
        '\u{AD}' => "SOFT HYPHEN",
        '\u{1680}' => "OGHAM SPACE MARK",
        '\u{180E}' => "MONGOLIAN VOWEL SEPARATOR",
        '\u{2000}' => "EN QUAD",
        '\u{2001}' => "EM QUAD",
        '\u{2002}' => "EN SPACE",
        '\u{2003}' => "EM SPACE",
        '\u{2004}' => "THREE-PER-EM SPACE",
        '\u{2005}' => "FOUR-PER-EM SPACE",
        '\u{2006}' => "SIX-PER-EM SPACE",
        '\u{2007}' => "FIGURE SPACE",
        '\u{2008}' => "PUNCTUATION SPACE",
        '\u{2009}' => "THIN SPACE",
        '\u{200A}' => "HAIR SPACE",
        '\u{200B}' => "ZERO WIDTH SPACE",
        '\u{200C}' => "ZERO WIDTH NON-JOINER",
        '\u{200D}' => "ZERO WIDTH JOINER",
        '\u{2028}' => "LINE SEPARATOR",
        '\u{2029}' => "PARAGRAPH SEPARATOR",
        '\u{202F}' => "NARROW NO-BREAK SPACE",
        '\u{205F}' => "MEDIUM MATHEMATICAL SPACE",
        '\u{2060}' => "WORD JOINER",
        '\u{2212}' => "MINUS SIGN",
        '\u{3000}' => "IDEOGRAPHIC SPACE",
        '\u{FEFF}' => "ZERO WIDTH NO-BREAK SPACE (byte order mark)",
        c if c.is_control() => "a control character",
        _ => "",
    };
    let code = format!("U+{:04X}", u32::from(c));
    if name.is_empty() {
        code
    } else {
        format!("{code} {name}")
    }
}

fn parse_fields(words: &[(usize, &str)]) -> Result<Parsed, CronError> {
    let (kinds, seconds_given, year_given): (&[Kind], bool, bool) = match words.len() {
        5 => (
            &[
                Kind::Minute,
                Kind::Hour,
                Kind::DayOfMonth,
                Kind::Month,
                Kind::DayOfWeek,
            ],
            false,
            false,
        ),
        6 => (
            &[
                Kind::Second,
                Kind::Minute,
                Kind::Hour,
                Kind::DayOfMonth,
                Kind::Month,
                Kind::DayOfWeek,
            ],
            true,
            false,
        ),
        7 => (
            &[
                Kind::Second,
                Kind::Minute,
                Kind::Hour,
                Kind::DayOfMonth,
                Kind::Month,
                Kind::DayOfWeek,
                Kind::Year,
            ],
            true,
            true,
        ),
        n => {
            return Err(CronError::new(format!(
                "expected 5, 6 or 7 fields (seconds first, year last), found {n}"
            )))
        }
    };
    let mut fields = Vec::with_capacity(7);
    if !seconds_given {
        fields.push(Field {
            kind: Kind::Second,
            text: "0".to_owned(),
            items: vec![Item::Value(0)],
        });
    }
    for (kind, (at, word)) in kinds.iter().zip(words) {
        fields.push(parse_field(*kind, word).map_err(|e| e.shifted(*at, word.len()))?);
    }
    if !year_given {
        fields.push(Field {
            kind: Kind::Year,
            text: "*".to_owned(),
            items: vec![Item::All],
        });
    }
    let fields: [Field; 7] = fields
        .try_into()
        .map_err(|_| CronError::new("expected 5, 6 or 7 fields (seconds first, year last)"))?;
    let parsed = Parsed {
        fields,
        alias: None,
    };

    let dom = parsed.field(Kind::DayOfMonth);
    if dom.items.contains(&Item::Last) && dom.items.contains(&Item::LastWeekday) {
        let at = words
            .iter()
            .find(|(_, w)| *w == dom.text)
            .map_or(0, |(at, _)| *at);
        return Err(CronError::new(format!(
            "`L` and `LW` cannot be combined in the list `{}` of the day-of-month field; choose one",
            dom.text
        ))
        .spanning(at, dom.text.len()));
    }
    Ok(parsed)
}

/// Parses one field; an error's span is relative to the field's text.
fn parse_field(kind: Kind, text: &str) -> Result<Field, CronError> {
    let f = kind.name();
    if let Some((at, c)) = text
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || "*/-,#?".contains(*c)))
    {
        return Err(CronError::new(format!(
            "unexpected character `{c}` in `{text}` of the {f} field"
        ))
        .spanning(at, c.len_utf8()));
    }
    if text.contains('?') {
        if !kind.is_day() {
            return Err(CronError::new(format!(
                "`?` in the {f} field; `?` is only allowed in the day-of-month and day-of-week fields"
            )));
        }
        if text != "?" {
            return Err(CronError::new(format!(
                "`?` must stand alone in the {f} field, found `{text}`; write `?` or `*`"
            )));
        }
        return Ok(Field {
            kind,
            text: text.to_owned(),
            items: vec![Item::All],
        });
    }
    let mut items = Vec::new();
    let mut at: usize = 0;
    for part in text.split(',') {
        if part.is_empty() {
            return Err(CronError::new(format!(
                "empty item in the list `{text}` of the {f} field"
            ))
            .spanning(at.saturating_sub(1), 1));
        }
        items.push(parse_item(kind, part).map_err(|e| e.shifted(at, part.len()))?);
        at += part.len() + 1;
    }
    Ok(Field {
        kind,
        text: text.to_owned(),
        items,
    })
}

fn parse_item(kind: Kind, item: &str) -> Result<Item, CronError> {
    let f = kind.name();
    let (min, max) = kind.bounds();
    if kind == Kind::DayOfMonth && !item.contains('/') {
        if let Some(days) = item.strip_prefix("L-").or_else(|| item.strip_prefix("l-")) {
            let digits = !days.is_empty() && days.bytes().all(|b| b.is_ascii_digit());
            // All digits: a parse failure can only be an overflow, which is out of range too.
            let days = digits.then(|| days.parse::<u64>().unwrap_or(u64::MAX));
            return match days {
                Some(0) => Ok(Item::Last),
                Some(n @ 1..=30) => Ok(Item::LastMinus(n as u32)),
                Some(_) => Err(CronError::new(format!(
                    "`{item}` in the day-of-month field: `L-N` counts 0-30 days back from the last day of the month, so N must be at most 30"
                ))),
                None => Err(CronError::new(format!(
                    "`{item}` in the day-of-month field: write `L-N` with a number of days 0-30 before the last day of the month, as in `L-3`"
                ))),
            };
        }
    }
    if let Some((base, step_text)) = item.split_once('/') {
        if step_text.contains('/') {
            return Err(CronError::new(format!(
                "more than one `/` in `{item}` of the {f} field"
            )));
        }
        if step_text.is_empty() {
            return Err(CronError::new(format!(
                "missing step after `/` in `{item}` of the {f} field; write a number such as `{base}/5`"
            )));
        }
        if !step_text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(CronError::new(format!(
                "the step `{step_text}` in `{item}` of the {f} field is not a number"
            )));
        }
        // All digits: a parse failure can only be an overflow, which is a very large step.
        let step = step_text.parse::<u64>().unwrap_or(u64::MAX);
        if step == 0 {
            return Err(CronError::new(format!(
                "step 0 in `{item}` of the {f} field; a step must be at least 1"
            )));
        }
        let (start, end) = if base == "*" {
            (min, max)
        } else if base.contains('-') {
            parse_range(kind, base, item)?
        } else if base.is_empty() {
            return Err(CronError::new(format!(
                "`{item}` needs a range or `*` before the step; write `*/{step_text}`"
            )));
        } else {
            // Report a bad value first; a good one still lacks its range.
            parse_value(kind, base, item)?;
            return Err(CronError::new(format!(
                "`{item}` needs a range or `*` before the step; write `{base}-{max}/{step_text}` or `*/{step_text}`"
            )));
        };
        // A step beyond the span selects the start only (cronie accepts it); clamp it so that the
        // evaluator never overflows.
        let span = u64::from(end - start) + 1;
        let step = u32::try_from(step.min(span)).unwrap_or(1);
        return Ok(Item::Range { start, end, step });
    }
    if item == "*" {
        return Ok(Item::All);
    }
    if item.contains('-') {
        let (start, end) = parse_range(kind, item, item)?;
        return Ok(Item::Range {
            start,
            end,
            step: 1,
        });
    }
    let upper = item.to_ascii_uppercase();
    match kind {
        Kind::DayOfMonth => {
            if upper == "L" {
                return Ok(Item::Last);
            }
            if upper == "LW" {
                return Ok(Item::LastWeekday);
            }
            if let Some(day) = upper.strip_suffix('W') {
                if !day.is_empty() && day.bytes().all(|b| b.is_ascii_digit()) {
                    return Ok(Item::NearestWeekday(parse_value(kind, day, item)?));
                }
            }
        }
        Kind::DayOfWeek => {
            if let Some((day, nth)) = item.split_once('#') {
                if day.is_empty() {
                    return Err(CronError::new(format!(
                        "`{item}` needs a weekday before `#` in the day-of-week field, as in `5#2` (the second Friday)"
                    )));
                }
                let day = parse_value(kind, day, item)?;
                let digits = !nth.is_empty() && nth.bytes().all(|b| b.is_ascii_digit());
                return match nth.parse::<u32>() {
                    Ok(nth @ 1..=5) if digits => Ok(Item::Nth { day, nth }),
                    _ => Err(CronError::new(format!(
                        "`{item}` in the day-of-week field: the number after `#` must be 1-5"
                    ))),
                };
            }
            if upper == "L" {
                return Err(CronError::new(
                    "`L` alone is not allowed in the day-of-week field; write the weekday before it, as in `5L` (the last Friday)",
                ));
            }
            let is_name =
                MONTH_NAMES.contains(&upper.as_str()) || DAY_NAMES.contains(&upper.as_str());
            if !is_name {
                if let Some(day) = item.strip_suffix(['L', 'l']) {
                    return Ok(Item::LastOf(parse_value(kind, day, item)?));
                }
            }
        }
        _ => {}
    }
    parse_value(kind, item, item).map(Item::Value)
}

fn parse_range(kind: Kind, range: &str, item: &str) -> Result<(u32, u32), CronError> {
    let f = kind.name();
    let parts: Vec<&str> = range.split('-').collect();
    if parts.len() != 2 {
        return Err(CronError::new(format!(
            "malformed range `{range}` in the {f} field; write it as `N-M`"
        )));
    }
    if parts.iter().any(|p| p.is_empty()) {
        return Err(CronError::new(format!(
            "incomplete range `{range}` in the {f} field; write it as `N-M`"
        )));
    }
    let start = parse_value(kind, parts[0], item)?;
    let mut end = parse_value(kind, parts[1], item)?;
    // cronie: a day-of-week range may end in Sunday written as 0 (`5-0`, `FRI-SUN`).
    if kind == Kind::DayOfWeek && end == 0 && start > 0 {
        end = 7;
    }
    if start > end {
        return Err(CronError::new(format!(
            "reversed range `{range}` in the {f} field; write the smaller value first"
        )));
    }
    Ok((start, end))
}

/// Parses one value (a number or, in its own field, a name) and checks its range.
fn parse_value(kind: Kind, token: &str, item: &str) -> Result<u32, CronError> {
    let f = kind.name();
    let (min, max) = kind.bounds();
    if token.bytes().all(|b| b.is_ascii_digit()) {
        let value = token
            .parse::<u32>()
            .ok()
            .filter(|v| (min..=max).contains(v));
        return value.ok_or_else(|| {
            CronError::new(format!(
                "`{token}` is out of range for the {f} field ({})",
                kind.valid_values()
            ))
        });
    }
    let upper = token.to_ascii_uppercase();
    if let Some(index) = MONTH_NAMES.iter().position(|n| *n == upper) {
        return if kind == Kind::Month {
            Ok(index as u32 + 1)
        } else {
            Err(CronError::new(format!(
                "`{token}` is a month name but stands in the {f} field"
            )))
        };
    }
    if let Some(index) = DAY_NAMES.iter().position(|n| *n == upper) {
        return if kind == Kind::DayOfWeek {
            Ok(index as u32)
        } else {
            Err(CronError::new(format!(
                "`{token}` is a day-of-week name but stands in the {f} field"
            )))
        };
    }
    if token.contains('*') {
        return Err(CronError::new(format!(
            "`*` cannot be part of a range in `{item}` of the {f} field; write `*` alone, `*/S` or `N-M`"
        )));
    }
    let has = |c: char| upper.contains(c);
    let message = match kind {
        Kind::DayOfMonth if has('#') => format!(
            "`{item}` is not allowed in the day-of-month field; `#` belongs to the day-of-week field, as in `5#2`"
        ),
        Kind::DayOfMonth if (has('L') || has('W')) && token == item => format!(
            "`{item}` is not valid in the day-of-month field; write `L` (last day), `L-N` (N days before the last, such as `L-3`), `LW` (last weekday) or a day with `W` such as `15W` (nearest weekday)"
        ),
        Kind::DayOfMonth if has('L') || has('W') => format!(
            "`{item}` is not valid in the day-of-month field; `L`, `L-N`, `LW` and `NW` (such as `15W`) stand alone, not in ranges or steps"
        ),
        Kind::DayOfWeek if has('W') => format!(
            "`{item}` is not allowed in the day-of-week field; `W` belongs to the day-of-month field, as in `15W`"
        ),
        Kind::DayOfWeek if has('#') || has('L') => format!(
            "`{item}` is not valid in the day-of-week field; `D#N` and `DL` (such as `5#2`, `5L`) stand alone, not in ranges or steps"
        ),
        _ if has('#') => format!(
            "`{item}` is not allowed in the {f} field; `#` belongs to the day-of-week field, as in `5#2`"
        ),
        _ if upper == "L" || upper == "LW" || (has('W') && upper.ends_with('W')) || upper.ends_with('L') => format!(
            "`{item}` is not allowed in the {f} field; `L` and `W` belong to the day-of-month field (`L`, `LW`, `15W`) and `L` to the day-of-week field (`5L`)"
        ),
        Kind::Month => format!(
            "unknown month `{token}` in the month field; use 1-12 or `JAN`-`DEC`"
        ),
        Kind::DayOfWeek => format!(
            "unknown weekday `{token}` in the day-of-week field; use 0-7 or `SUN`-`SAT`"
        ),
        _ => format!(
            "`{token}` is not a number in the {f} field ({})",
            kind.valid_values()
        ),
    };
    Err(CronError::new(message))
}
