//! `L-N` in the day-of-month field, the separators an expression may use, and the position an
//! error carries.

use chrono::{DateTime, Datelike, SecondsFormat, Utc};
use cronguard_schedule::{validate_cron, CronExpr, Schedule};

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).expect(text).to_utc()
}

/// The dates (`YYYY-MM-DD`) of the first `n` fires in UTC strictly after `after`.
fn dates(expr: &str, after: &str, n: usize) -> Vec<String> {
    let schedule = Schedule::cron(expr, "UTC").expect(expr);
    schedule
        .fires_after(utc(after))
        .take(n)
        .map(|f| f.to_rfc3339_opts(SecondsFormat::Secs, true)[..10].to_owned())
        .collect()
}

#[test]
fn l_minus_n_counts_back_from_the_last_day_of_each_month() {
    assert_eq!(
        dates("0 0 L-3 * *", "2026-01-01T00:00:00Z", 5),
        [
            "2026-01-28",
            "2026-02-25",
            "2026-03-28",
            "2026-04-27",
            "2026-05-28"
        ]
    );
    // February: 28 days in common years, 29 in leap years (2100 is not one, 2000 was).
    assert_eq!(
        dates("0 0 L-1 2 *", "2027-01-01T00:00:00Z", 3),
        ["2027-02-27", "2028-02-28", "2029-02-27"]
    );
    assert_eq!(
        dates("0 0 L-1 2 *", "2099-06-01T00:00:00Z", 3),
        ["2100-02-27", "2101-02-27", "2102-02-27"]
    );
    assert_eq!(
        dates("0 0 L-1 2 *", "1999-06-01T00:00:00Z", 1),
        ["2000-02-28"]
    );
    // `L-0` is `L`.
    assert_eq!(
        dates("0 0 L-0 * *", "2026-01-01T00:00:00Z", 2),
        dates("0 0 L * *", "2026-01-01T00:00:00Z", 2)
    );
}

#[test]
fn a_month_where_l_minus_n_falls_before_the_first_has_no_fire() {
    // Day 1 of the 31-day months only.
    assert_eq!(
        dates("0 0 L-30 * *", "2026-01-01T12:00:00Z", 4),
        ["2026-03-01", "2026-05-01", "2026-07-01", "2026-08-01"]
    );
    // February 1 only in leap years (29 - 28), never in common ones.
    assert_eq!(
        dates("0 0 L-28 2 *", "2026-01-01T00:00:00Z", 2),
        ["2028-02-01", "2032-02-01"]
    );
    assert!(validate_cron("0 0 L-29 2 *").is_err());
}

#[test]
fn l_minus_n_in_lists() {
    assert_eq!(
        dates("0 0 L-3,L * *", "2026-01-01T00:00:00Z", 4),
        ["2026-01-28", "2026-01-31", "2026-02-25", "2026-02-28"]
    );
    assert_eq!(
        dates("0 0 1,L-1 * *", "2026-01-01T12:00:00Z", 4),
        ["2026-01-30", "2026-02-01", "2026-02-27", "2026-03-01"]
    );
    assert_eq!(
        dates("0 0 L-2,15W * *", "2026-02-01T00:00:00Z", 3),
        ["2026-02-16", "2026-02-26", "2026-03-16"]
    );
}

#[test]
fn l_minus_n_follows_the_day_rule() {
    // Both day fields restricted: OR. March 2026: Mondays are 2, 9, 16, 23, 30; L-30 is the 1st.
    assert_eq!(
        dates("0 0 L-30 3 MON", "2026-02-28T00:00:00Z", 6),
        [
            "2026-03-01",
            "2026-03-02",
            "2026-03-09",
            "2026-03-16",
            "2026-03-23",
            "2026-03-30"
        ]
    );
    // In April L-30 falls before the 1st: only the Mondays remain.
    assert_eq!(
        dates("0 0 L-30 4 MON", "2026-03-31T00:00:00Z", 2),
        ["2026-04-06", "2026-04-13"]
    );
    // A day-of-week field starting with `*` ANDs: L-3 days that are Sun, Tue, Thu or Sat.
    let and: Vec<String> = dates("0 0 L-3 * */2", "2026-01-01T00:00:00Z", 4);
    for date in &and {
        let day = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").expect("date");
        let last = day
            .with_day(1)
            .and_then(|d| d.checked_add_months(chrono::Months::new(1)))
            .and_then(|d| d.pred_opt())
            .expect("last day");
        assert_eq!(last.day() - day.day(), 3, "{date}");
        assert_eq!(day.weekday().num_days_from_sunday() % 2, 0, "{date}");
    }
    assert_eq!(and.len(), 4);
}

#[test]
fn l_minus_n_with_a_year_field() {
    assert_eq!(
        dates("0 0 0 L-1 2 * 2028-2030", "2026-01-01T00:00:00Z", 5),
        ["2028-02-28", "2029-02-27", "2030-02-27"]
    );
}

#[test]
fn tabs_and_spaces_separate_fields_and_may_surround_the_expression() {
    for expr in [
        "0 0 * * *",
        "\t0\t0 * *  *\t ",
        "  0 0 * * *  ",
        "\t@daily\t",
    ] {
        assert!(validate_cron(expr).is_ok(), "{expr:?}");
    }
}

#[test]
fn other_whitespace_is_named_with_its_position() {
    let cases = [
        ("0 0\u{a0}* * *", "U+00A0 NO-BREAK SPACE", 4, 3..5),
        ("0\n0 * * *", "U+000A LINE FEED", 2, 1..2),
        ("0 0 * * *\r\n", "U+000D CARRIAGE RETURN", 10, 9..10),
        ("0 0 *\u{2003}* *", "U+2003 EM SPACE", 6, 5..8),
        (
            "é 0\u{3000}0 * * *",
            "non-ASCII character `é` (U+00E9)",
            1,
            0..2,
        ),
        ("0 0 * 1 \u{3000}MON", "U+3000 IDEOGRAPHIC SPACE", 9, 8..11),
    ];
    for (expr, named, column, span) in cases {
        let err = CronExpr::parse(expr).expect_err(expr);
        assert!(err.reason().starts_with(named), "{expr:?}: {err}");
        assert_eq!(err.column(), Some(column), "{expr:?}");
        assert_eq!(err.span(), Some(span), "{expr:?}");
        assert!(err
            .to_string()
            .starts_with(&format!("at column {column}: ")));
    }
}

#[test]
fn errors_point_at_the_field_or_item_at_fault() {
    let cases = [
        ("0 0 L-31 * *", 5, 4..8),
        ("0 0 1,L-31 * *", 7, 6..10),
        ("0 30 * * *", 3, 2..4),
        ("  0 0 * 13 *", 9, 8..10),
        ("*/5/2 * * * *", 1, 0..5),
        ("0 0 * * 1;2", 10, 9..10),
        ("@daily 5", 8, 7..8),
        ("@often", 1, 0..6),
        ("1,,2 * * * *", 2, 1..2),
        ("0 0 * * MON-FRI/0", 9, 8..17),
    ];
    for (expr, column, span) in cases {
        let err = validate_cron(expr).expect_err(expr);
        assert_eq!(
            (err.column(), err.span()),
            (Some(column), Some(span)),
            "{expr}: {err}"
        );
    }
    // The expression as a whole: no position.
    for expr in ["* * * *", "0 0 30 2 *"] {
        assert_eq!(
            validate_cron(expr).expect_err(expr).column(),
            None,
            "{expr}"
        );
    }
    let err = Schedule::cron("0 0 L-31 * *", "UTC").expect_err("L-31");
    assert!(
        err.to_string()
            .starts_with("invalid cron expression `0 0 L-31 * *` at column 5: `L-31`"),
        "{err}"
    );
}
