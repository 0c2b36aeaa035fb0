//! `Schedule::describe`: every construct of the dialect in words.

use std::time::Duration;

use cronguard_schedule::Schedule;

const TABLE: &[(&str, &str)] = &[
    // Times of day.
    ("30 2 * * *", "at 02:30 every day"),
    ("0 0 * * *", "at 00:00 every day"),
    ("15 30 2 * * *", "at 02:30:15 every day"),
    ("0 9,17 * * *", "at 09:00 and 17:00 every day"),
    (
        "0,30 9,17 * * *",
        "at 09:00, 09:30, 17:00 and 17:30 every day",
    ),
    ("* * * * *", "every minute"),
    ("*/15 * * * *", "every 15 minutes"),
    (
        "*/15 9-17 * * MON-FRI",
        "every 15 minutes from 09:00 through 17:45, Monday to Friday",
    ),
    ("* 9 * * *", "every minute from 09:00 through 09:59"),
    ("0 * * * *", "at minute 0 past every hour"),
    ("30 */2 * * *", "at minute 30 past every 2 hours"),
    ("5-10 * * * *", "at minutes 5 through 10 past every hour"),
    (
        "0 9-17/2 * * *",
        "at minute 0 past every 2nd hour from 09:00 through 17:00",
    ),
    (
        "*/20 9,12,17 * * *",
        "every 20 minutes past 09:00, 12:00 and 17:00",
    ),
    (
        "0,15,30,45 1,2 * * *",
        "at minutes 0, 15, 30 and 45 past 01:00 and 02:00",
    ),
    ("* * * * * *", "every second"),
    ("*/10 * * * * *", "every 10 seconds"),
    ("30 * * * * *", "at second 30 of every minute"),
    ("0,30 */5 * * * *", "at seconds 0 and 30 every 5 minutes"),
    // Days of the month.
    ("0 0 1 * *", "at 00:00 on the 1st of the month"),
    (
        "0 0 1,15 * *",
        "at 00:00 on the 1st and the 15th of the month",
    ),
    (
        "0 0 1-7 * *",
        "at 00:00 on the 1st through the 7th of the month",
    ),
    (
        "0 0 1-31/7 * *",
        "at 00:00 on every 7th day from the 1st through the 31st of the month",
    ),
    ("0 0 */2 * *", "at 00:00 on every 2nd day of the month"),
    ("0 0 L * *", "at 00:00 on the last day of the month"),
    (
        "0 0 L-1 * *",
        "at 00:00 on the second-to-last day of the month",
    ),
    (
        "0 0 L-3,L * *",
        "at 00:00 on the 4th-to-last day and the last day of the month",
    ),
    ("0 0 LW * *", "at 00:00 on the last weekday of the month"),
    (
        "0 0 15W * *",
        "at 00:00 on the weekday nearest the 15th of the month",
    ),
    (
        "0 0 21,22,23 * *",
        "at 00:00 on the 21st, the 22nd and the 23rd of the month",
    ),
    (
        "0 0 L-30 * MON",
        "at 00:00 on the 31st-to-last day of the month and on Monday",
    ),
    // Days of the week.
    ("0 9 * * MON", "at 09:00 on Monday"),
    ("0 9 * * 0,7", "at 09:00 on Sunday"),
    ("0 9 * * 1-5", "at 09:00, Monday to Friday"),
    ("0 9 * * FRI-SUN", "at 09:00, Friday to Sunday"),
    ("0 9 * * 1,3,5", "at 09:00 on Monday, Wednesday and Friday"),
    ("0 9 * * 5#2", "at 09:00 on the second Friday of the month"),
    ("0 9 * * 5L", "at 09:00 on the last Friday of the month"),
    (
        "0 9 * * */2",
        "at 09:00 on every 2nd day of the week from Sunday",
    ),
    (
        "0 9 * * 1-5/2",
        "at 09:00 on every 2nd day from Monday to Friday",
    ),
    ("0 0 ? * MON", "at 00:00 on Monday"),
    // Both day fields: OR, or AND when one starts with `*`.
    (
        "0 0 13 * 5",
        "at 00:00 on the 13th of the month and on Friday",
    ),
    (
        "0 0 */2 * 1",
        "at 00:00 on every 2nd day of the month if it is Monday",
    ),
    // Months and years.
    ("0 0 1 1 *", "at 00:00 on the 1st of January"),
    ("0 0 1 1,7 *", "at 00:00 on the 1st of January and July"),
    ("0 0 * 6-8 *", "at 00:00 every day in June through August"),
    (
        "0 9 * */3 MON",
        "at 09:00 on Monday in every 3rd month from January",
    ),
    ("0 0 0 1 1 * 2030", "at 00:00 on the 1st of January in 2030"),
    (
        "0 0 0 29 2 * 2028-2040/4",
        "at 00:00 on the 29th of February in every 4th year from 2028 through 2040",
    ),
    // Aliases.
    ("@daily", "at 00:00 every day"),
    ("@hourly", "at minute 0 past every hour"),
    ("@weekly", "at 00:00 on Sunday"),
    ("@monthly", "at 00:00 on the 1st of the month"),
    ("@yearly", "at 00:00 on the 1st of January"),
];

#[test]
fn every_construct_in_words() {
    let mut wrong = Vec::new();
    for (expr, words) in TABLE {
        let described = Schedule::cron(expr, "UTC").expect(expr).describe();
        let expected = format!("{words} (UTC)");
        if described != expected {
            wrong.push(format!("{expr:?}: {described:?}, expected {expected:?}"));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn the_zone_is_named() {
    let schedule = Schedule::cron("30 2 * * *", "Europe/Berlin").expect("valid");
    assert_eq!(schedule.describe(), "at 02:30 every day (Europe/Berlin)");
}

#[test]
fn intervals_in_words() {
    for (secs, millis, words) in [
        (30, 0, "every 30 seconds"),
        (1, 0, "every second"),
        (60, 0, "every minute"),
        (300, 0, "every 5 minutes"),
        (7200, 0, "every 2 hours"),
        (86_400, 0, "every day"),
        (90, 0, "every 90 seconds"),
        (0, 250, "every 250 milliseconds"),
        (1, 500, "every 1s 500ms"),
    ] {
        let interval = Duration::from_secs(secs) + Duration::from_millis(millis);
        let schedule = Schedule::every(interval).expect("positive");
        assert_eq!(schedule.describe(), words);
    }
}
