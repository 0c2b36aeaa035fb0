//! The strict grammar: a corpus of valid and invalid expressions with their verdicts.

use cronguard_schedule::{validate_cron, CronExpr, Schedule, ScheduleError};

/// Expressions that must be accepted.
const VALID: &[&str] = &[
    "* * * * *",
    "0 * * * *",
    "*/15 * * * *",
    "0 0 * * *",
    "30 2 * * *",
    "00 05 * * *",
    "  0 0 * * *  ",
    "0\t0 * * *\t*",
    "0 9-17 * * MON-FRI",
    "0 9-17 * * mon-fri",
    "0 9-17/2 * * Mon-Fri/2",
    "0 0 1 JAN *",
    "0 0 1 jan-mar *",
    "0 0 1 1,JUN,dec *",
    "0 0 * * SUN",
    "0 0 * * 0",
    "0 0 * * 7",
    "0 0 * * 5-0",
    "0 0 * * FRI-SUN",
    "0 0 * * 1-7",
    "0 0 * * */2",
    "0 0 L * *",
    "0 0 l * *",
    "0 0 LW * *",
    "0 0 15W * *",
    "0 0 1w * *",
    "0 0 1,15W,L * *",
    "0 0 L-0 * *",
    "0 0 L-3 * *",
    "0 0 l-30 * *",
    "0 0 L-3,L * *",
    "0 0 1,L-1 * *",
    "0 0 L-2,15W * *",
    "0 0 L-1 * MON",
    "0 0 L-30 * MON",
    "0 0 L-5 2 *",
    "0 0 0 L-28 2 * 2028",
    "0 0 L-30 1,2 *",
    "0 0 * * 5#2",
    "0 0 * * FRI#2",
    "0 0 * * 7#1",
    "0 0 * * 5L",
    "0 0 * * 5l",
    "0 0 * * FRIL",
    "0 0 * * 1#1,5L",
    "0 0 ? * MON",
    "0 0 1 * ?",
    "*/10 * * * * *",
    "0 */5 * * * *",
    "0 0 0 * * * 2030",
    "0 0 0 29 2 * 2028",
    "0 0 0 1 1 * 2026-2030/2",
    "0 0 0 1 1 * */4",
    "0 0 0 1 1 * 1970,2199",
    "*/90 * * * *",
    "0-10/60 * * * *",
    "5-55/10 * * * *",
    "0 0 */2 * *",
    "0 0 */2 * 1",
    "0 0 1-31/7 * *",
    "0 0 31 * *",
    "0 0 30 1-3 *",
    "0 0 29 2 *",
    "0 0 30 2 1",
    "59 23 31 12 *",
    "0 0 * 1,6,12 *",
    "5,10,15-20,*/7 * * * *",
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
    "@DAILY",
    " @hourly ",
];

/// Expressions that must be rejected, with the exact reason.
const INVALID: &[(&str, &str)] = &[
    // The examples of the contract.
    ("1,,2 * * * *", "empty item in the list `1,,2` of the minute field"),
    ("0 30 * * *", "`30` is out of range for the hour field (0-23)"),
    ("0 0 * MON *", "`MON` is a day-of-week name but stands in the month field"),
    ("5-1 * * * *", "reversed range `5-1` in the minute field; write the smaller value first"),
    ("5/15 * * * *", "`5/15` needs a range or `*` before the step; write `5-59/15` or `*/15`"),
    ("*/0 * * * * *", "step 0 in `*/0` of the second field; a step must be at least 1"),
    ("0 0 30 2 *", "the expression never fires: day 30 never occurs in February"),
    ("* * * *", "expected 5, 6 or 7 fields (seconds first, year last), found 4"),
    // Empty items.
    ("1, * * * *", "empty item in the list `1,` of the minute field"),
    (",1 * * * *", "empty item in the list `,1` of the minute field"),
    ("0 0 1,,15 * *", "empty item in the list `1,,15` of the day-of-month field"),
    // Names in the wrong field, unknown names.
    ("0 0 * * JAN", "`JAN` is a month name but stands in the day-of-week field"),
    ("0 0 * * JUL", "`JUL` is a month name but stands in the day-of-week field"),
    ("0 0 * jan-MON *", "`MON` is a day-of-week name but stands in the month field"),
    ("0 MON * * *", "`MON` is a day-of-week name but stands in the hour field"),
    ("0 0 1 JANUARY *", "unknown month `JANUARY` in the month field; use 1-12 or `JAN`-`DEC`"),
    ("0 0 * * MONDAY", "unknown weekday `MONDAY` in the day-of-week field; use 0-7 or `SUN`-`SAT`"),
    ("a * * * *", "`a` is not a number in the minute field (0-59)"),
    // Ranges.
    ("0 0 * * 7-1", "reversed range `7-1` in the day-of-week field; write the smaller value first"),
    ("0 22-2 * * *", "reversed range `22-2` in the hour field; write the smaller value first"),
    ("0 0 * DEC-JAN *", "reversed range `DEC-JAN` in the month field; write the smaller value first"),
    ("1-2-3 * * * *", "malformed range `1-2-3` in the minute field; write it as `N-M`"),
    ("1- * * * *", "incomplete range `1-` in the minute field; write it as `N-M`"),
    ("-1 * * * *", "incomplete range `-1` in the minute field; write it as `N-M`"),
    ("*-5 * * * *", "`*` cannot be part of a range in `*-5` of the minute field; write `*` alone, `*/S` or `N-M`"),
    // Steps.
    ("/5 * * * *", "`/5` needs a range or `*` before the step; write `*/5`"),
    ("0 0 1/2 * *", "`1/2` needs a range or `*` before the step; write `1-31/2` or `*/2`"),
    ("*/5/2 * * * *", "more than one `/` in `*/5/2` of the minute field"),
    ("*/ * * * *", "missing step after `/` in `*/` of the minute field; write a number such as `*/5`"),
    ("*/x * * * *", "the step `x` in `*/x` of the minute field is not a number"),
    ("0 0 1-5/0 * *", "step 0 in `1-5/0` of the day-of-month field; a step must be at least 1"),
    // Out of range.
    ("60 * * * *", "`60` is out of range for the minute field (0-59)"),
    ("0 0 32 * *", "`32` is out of range for the day-of-month field (1-31)"),
    ("0 0 0 * *", "`0` is out of range for the day-of-month field (1-31)"),
    ("0 0 * 13 *", "`13` is out of range for the month field (1-12 or `JAN`-`DEC`)"),
    ("0 0 * * 8", "`8` is out of range for the day-of-week field (0-7 or `SUN`-`SAT`, 0 and 7 are Sunday)"),
    ("0 0 0 1 1 * 1969", "`1969` is out of range for the year field (1970-2199)"),
    ("0 0 0 1 1 * 2200", "`2200` is out of range for the year field (1970-2199)"),
    ("99999999999 * * * *", "`99999999999` is out of range for the minute field (0-59)"),
    ("0 0 32W * *", "`32` is out of range for the day-of-month field (1-31)"),
    ("0 0 1 1 * 2020", "`2020` is out of range for the day-of-week field (0-7 or `SUN`-`SAT`, 0 and 7 are Sunday)"),
    // Unknown characters and misplaced specials.
    ("0 0 * * +1", "unexpected character `+` in `+1` of the day-of-week field"),
    ("0 0 * * 1;2", "unexpected character `;` in `1;2` of the day-of-week field"),
    ("? * * * *", "`?` in the minute field; `?` is only allowed in the day-of-month and day-of-week fields"),
    ("0 0 1 ? *", "`?` in the month field; `?` is only allowed in the day-of-month and day-of-week fields"),
    ("0 0 1,? * *", "`?` must stand alone in the day-of-month field, found `1,?`; write `?` or `*`"),
    ("0 L * * *", "`L` is not allowed in the hour field; `L` and `W` belong to the day-of-month field (`L`, `LW`, `15W`) and `L` to the day-of-week field (`5L`)"),
    ("0 0 * 5L *", "`5L` is not allowed in the month field; `L` and `W` belong to the day-of-month field (`L`, `LW`, `15W`) and `L` to the day-of-week field (`5L`)"),
    ("0 0 * * L", "`L` alone is not allowed in the day-of-week field; write the weekday before it, as in `5L` (the last Friday)"),
    ("0 0 * * 1W", "`1W` is not allowed in the day-of-week field; `W` belongs to the day-of-month field, as in `15W`"),
    ("0 0 5#2 * *", "`5#2` is not allowed in the day-of-month field; `#` belongs to the day-of-week field, as in `5#2`"),
    ("0 0 W * *", "`W` is not valid in the day-of-month field; write `L` (last day), `L-N` (N days before the last, such as `L-3`), `LW` (last weekday) or a day with `W` such as `15W` (nearest weekday)"),
    ("0 0 L-2/2 * *", "`L-2/2` is not valid in the day-of-month field; `L`, `L-N`, `LW` and `NW` (such as `15W`) stand alone, not in ranges or steps"),
    ("0 0 1-L * *", "`1-L` is not valid in the day-of-month field; `L`, `L-N`, `LW` and `NW` (such as `15W`) stand alone, not in ranges or steps"),
    // `L-N`: 0 to 30 days before the last day of the month.
    ("0 0 L-31 * *", "`L-31` in the day-of-month field: `L-N` counts 0-30 days back from the last day of the month, so N must be at most 30"),
    ("0 0 L-99999999999 * *", "`L-99999999999` in the day-of-month field: `L-N` counts 0-30 days back from the last day of the month, so N must be at most 30"),
    ("0 0 1,L-45 * *", "`L-45` in the day-of-month field: `L-N` counts 0-30 days back from the last day of the month, so N must be at most 30"),
    ("0 0 L- * *", "`L-` in the day-of-month field: write `L-N` with a number of days 0-30 before the last day of the month, as in `L-3`"),
    ("0 0 L-x * *", "`L-x` in the day-of-month field: write `L-N` with a number of days 0-30 before the last day of the month, as in `L-3`"),
    ("0 0 L-3W * *", "`L-3W` in the day-of-month field: write `L-N` with a number of days 0-30 before the last day of the month, as in `L-3`"),
    ("0 0 * * L-2", "`L-2` is not valid in the day-of-week field; `D#N` and `DL` (such as `5#2`, `5L`) stand alone, not in ranges or steps"),
    ("0 0 L-0,LW * *", "`L` and `LW` cannot be combined in the list `L-0,LW` of the day-of-month field; choose one"),
    ("0 0 L-29 2 *", "the expression never fires: no date matches all of its fields"),
    ("0 0 0 L-28 2 * 2025-2027", "the expression never fires: no date in the years `2025-2027` matches all of its fields"),
    // Separators: ASCII space and tab only; digits and names ASCII only.
    ("0\n0 * * *", "U+000A LINE FEED between the fields; separate fields with ASCII spaces or tabs only (an expression pasted from a document or chat can carry such a character: retype the spaces)"),
    ("0 0 * * *\r", "U+000D CARRIAGE RETURN between the fields; separate fields with ASCII spaces or tabs only (an expression pasted from a document or chat can carry such a character: retype the spaces)"),
    ("0\u{b}0 * * *", "U+000B LINE TABULATION (vertical tab) between the fields; separate fields with ASCII spaces or tabs only (an expression pasted from a document or chat can carry such a character: retype the spaces)"),
    ("0 0\u{a0}* * *", "U+00A0 NO-BREAK SPACE between the fields; separate fields with ASCII spaces or tabs only (an expression pasted from a document or chat can carry such a character: retype the spaces)"),
    ("0 0 *\u{2003}* *", "U+2003 EM SPACE between the fields; separate fields with ASCII spaces or tabs only (an expression pasted from a document or chat can carry such a character: retype the spaces)"),
    ("0\u{3000}0 * * *", "U+3000 IDEOGRAPHIC SPACE between the fields; separate fields with ASCII spaces or tabs only (an expression pasted from a document or chat can carry such a character: retype the spaces)"),
    ("0 0 * * 1\u{200b}", "U+200B ZERO WIDTH SPACE between the fields; separate fields with ASCII spaces or tabs only (an expression pasted from a document or chat can carry such a character: retype the spaces)"),
    ("\u{feff}0 0 * * *", "U+FEFF ZERO WIDTH NO-BREAK SPACE (byte order mark) between the fields; separate fields with ASCII spaces or tabs only (an expression pasted from a document or chat can carry such a character: retype the spaces)"),
    ("0 0 * * *\u{0}", "U+0000 NULL in the expression; remove it (fields are separated by ASCII spaces or tabs)"),
    ("0 \u{ff11} * * *", "non-ASCII character `\u{ff11}` (U+FF11); digits and names are ASCII only, such as `0`-`9`, `JAN` or `MON`"),
    ("0 0 * * \u{41c}ON", "non-ASCII character `\u{41c}` (U+041C); digits and names are ASCII only, such as `0`-`9`, `JAN` or `MON`"),
    ("0 0 * * 1-5#2", "`1-5#2` is not valid in the day-of-week field; `D#N` and `DL` (such as `5#2`, `5L`) stand alone, not in ranges or steps"),
    ("0 0 * * 5#6", "`5#6` in the day-of-week field: the number after `#` must be 1-5"),
    ("0 0 * * 5#0", "`5#0` in the day-of-week field: the number after `#` must be 1-5"),
    ("0 0 * * #2", "`#2` needs a weekday before `#` in the day-of-week field, as in `5#2` (the second Friday)"),
    ("0 0 L,LW * *", "`L` and `LW` cannot be combined in the list `L,LW` of the day-of-month field; choose one"),
    // Field counts and aliases.
    ("", "the cron expression is empty; write 5, 6 or 7 fields (seconds first, year last) or an alias such as `@daily`"),
    ("   ", "the cron expression is empty; write 5, 6 or 7 fields (seconds first, year last) or an alias such as `@daily`"),
    ("1 2 3 4 5 6 7 8", "expected 5, 6 or 7 fields (seconds first, year last), found 8"),
    ("@often", "unknown alias `@often`; use `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight` or `@hourly`"),
    ("@reboot", "`@reboot` is not supported; use a fixed schedule such as `@daily`, or run the code at startup"),
    ("@daily 5", "the alias `@daily` stands alone; remove the fields after it"),
    ("@every 5m", "`@every` is not a cron alias; for a fixed interval use `every = \"30s\"` (`@every 30s` is accepted where a whole schedule is read from one line of text)"),
    // Never fires.
    ("0 0 31 4 *", "the expression never fires: day 31 never occurs in April"),
    ("0 0 31 4,6,9,11 *", "the expression never fires: day 31 never occurs in April, June, September or November"),
    ("0 0 30,31 FEB *", "the expression never fires: none of the days `30,31` occurs in February"),
    ("0 0 30W 2 *", "the expression never fires: day 30 never occurs in February"),
    ("0 0 0 31 2 * 2024", "the expression never fires: day 31 never occurs in February"),
    ("0 0 0 29 2 * 2100", "the expression never fires: February 29 does not occur in 2100"),
    ("0 0 0 29 2 * 2101-2103", "the expression never fires: February 29 does not occur in the years `2101-2103`"),
    ("0 0 0 ? 2 1#5 2026", "the expression never fires: no date in the years `2026` matches all of its fields"),
];

#[test]
fn valid_expressions_are_accepted() {
    for expr in VALID {
        if let Err(e) = validate_cron(expr) {
            panic!("`{expr}` was rejected: {e}");
        }
    }
}

#[test]
fn invalid_expressions_are_rejected_with_their_reason() {
    for (expr, reason) in INVALID {
        match validate_cron(expr) {
            Ok(()) => panic!("`{expr}` was accepted"),
            Err(e) => {
                assert_eq!(e.reason(), *reason, "reason for `{expr}`");
                let display = e.to_string();
                match e.column() {
                    Some(column) => assert_eq!(display, format!("at column {column}: {reason}")),
                    None => assert_eq!(display, *reason, "display for `{expr}`"),
                }
            }
        }
    }
}

#[test]
fn reasons_follow_the_rustc_style() {
    for (expr, _) in INVALID {
        let reason = validate_cron(expr).expect_err(expr).to_string();
        let first = reason.chars().next().expect("non-empty reason");
        assert!(!first.is_uppercase(), "`{expr}`: {reason}");
        assert!(!reason.ends_with('.'), "`{expr}`: {reason}");
    }
}

#[test]
fn validate_cron_and_schedule_agree_on_the_whole_corpus() {
    let corpus = VALID.iter().copied().chain(INVALID.iter().map(|(e, _)| *e));
    for expr in corpus {
        let validated = validate_cron(expr);
        let parsed = CronExpr::parse(expr).map(|_| ());
        let scheduled = Schedule::cron(expr, "Europe/Berlin");
        assert_eq!(validated, parsed, "`{expr}`");
        match (&validated, &scheduled) {
            (Ok(()), Ok(_)) => {}
            (
                Err(reason),
                Err(ScheduleError::Cron {
                    expr: given,
                    source,
                }),
            ) => {
                assert_eq!(reason, source, "`{expr}`");
                assert_eq!(given, expr);
            }
            _ => panic!(
                "`{expr}`: validate_cron says {validated:?}, Schedule::cron says {scheduled:?}"
            ),
        }
    }
}

#[test]
fn every_valid_expression_fires() {
    let start = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("valid")
        .to_utc();
    for expr in VALID {
        let schedule = Schedule::cron(expr, "UTC").expect(expr);
        let fires: Vec<_> = schedule.fires_after(start).take(3).collect();
        assert!(!fires.is_empty(), "`{expr}` never fires after 2026");
        assert!(fires.windows(2).all(|w| w[0] < w[1]), "`{expr}`: {fires:?}");
    }
}

#[test]
fn canonical_forms() {
    let cases = [
        ("@daily", "0 0 0 * * * *"),
        ("@midnight", "0 0 0 * * * *"),
        ("@hourly", "0 0 * * * * *"),
        ("@weekly", "0 0 0 * * 0 *"),
        ("0 9-17 * * MON-FRI", "0 0 9-17 * * 1-5 *"),
        ("0 0 ? JAN FRI-SUN", "0 0 0 * 1 5-7 *"),
        ("*/90 * * * *", "0 0-59/60 * * * * *"),
        ("0 0 0 1 1 * */4", "0 0 0 1 1 * 1970-2199/4"),
        ("0 0 * * fril,MON#2", "0 0 0 * * 5L,1#2 *"),
        ("0 0 L-0,l-3,1 * *", "0 0 0 L,L-3,1 * * *"),
    ];
    for (expr, canonical) in cases {
        assert_eq!(CronExpr::parse(expr).expect(expr).canonical(), canonical);
    }
}

#[test]
fn job_class() {
    for (expr, wildcard) in [
        ("*/15 * * * *", true),
        ("0 * * * *", true),
        ("@hourly", true),
        ("* 2 * * *", true),
        ("0 */2 * * *", true),
        ("30 2 * * *", false),
        ("*/10 30 2 * * *", false),
        ("0 1-3 * * *", false),
        ("@daily", false),
    ] {
        assert_eq!(
            CronExpr::parse(expr).expect(expr).is_wildcard(),
            wildcard,
            "{expr}"
        );
        assert_eq!(
            Schedule::cron(expr, "UTC").expect(expr).is_wildcard(),
            wildcard,
            "{expr}"
        );
    }
}

#[test]
fn schedule_errors() {
    let err = Schedule::cron("0 30 * * *", "UTC").expect_err("bad hour");
    assert_eq!(
        err.to_string(),
        "invalid cron expression `0 30 * * *` at column 3: `30` is out of range for the hour field (0-23)"
    );
    let err = Schedule::cron("0 0 * * *", "Europe/Berln").expect_err("bad zone");
    assert!(matches!(err, ScheduleError::TimeZone(_)));
    assert!(
        err.to_string().contains("did you mean `Europe/Berlin`?"),
        "{err}"
    );
    assert_eq!(
        Schedule::every(std::time::Duration::ZERO).expect_err("zero"),
        ScheduleError::ZeroInterval
    );
}
