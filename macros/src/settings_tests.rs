//! The attribute's documentation and its parser agree with the table of settings shared with
//! the runtime (`cronguard_schedule::settings`).

use cronguard_schedule::settings::{self, Form, Setting};
use proc_macro2::TokenStream;

/// The rustdoc of `scheduled`.
const DOCS: &str = include_str!("scheduled.md");

/// The cells of each row of the documented table of arguments, unescaped.
fn documented_rows() -> Vec<Vec<String>> {
    DOCS.lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let inner = line
                .trim()
                .strip_prefix('|')
                .and_then(|l| l.strip_suffix('|'))
                .unwrap_or_else(|| panic!("a row ends with `|`: {line}"));
            let mut cells = vec![String::new()];
            let mut escaped = false;
            for c in inner.chars() {
                match c {
                    '|' if !escaped => cells.push(String::new()),
                    '\\' if !escaped => escaped = true,
                    c => {
                        escaped = false;
                        if let Some(cell) = cells.last_mut() {
                            cell.push(c);
                        }
                    }
                }
            }
            cells.iter().map(|cell| cell.trim().to_owned()).collect()
        })
        .collect()
}

/// The name an argument cell shows (`lease` of `` `lease = "10s"` ``).
fn name_in(cell: &str) -> &str {
    let text = cell.trim_start_matches('`');
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

fn attribute_settings() -> impl Iterator<Item = (&'static str, &'static Setting)> {
    settings::SETTINGS
        .iter()
        .filter_map(|setting| setting.attribute.map(|name| (name, setting)))
}

#[test]
fn the_documented_table_has_one_row_per_argument_in_order() {
    let documented: Vec<String> = documented_rows()
        .iter()
        .map(|row| name_in(&row[0]).to_owned())
        .collect();
    assert_eq!(documented, settings::attributes(), "scheduled.md");
}

#[test]
fn the_documented_table_shows_each_form_meaning_and_default() {
    let rows = documented_rows();
    for (name, setting) in attribute_settings() {
        let row = rows
            .iter()
            .find(|row| name_in(&row[0]) == name)
            .unwrap_or_else(|| panic!("scheduled.md has no row for `{name}`"));
        let [argument, meaning, default] = row.as_slice() else {
            panic!("the row of `{name}` has three cells: {row:?}");
        };
        assert_eq!(meaning, setting.meaning, "the meaning of `{name}`");
        assert_eq!(default, setting.default, "the default of `{name}`");
        match setting.form {
            Form::Flag => assert_eq!(argument, &format!("`{name}`")),
            Form::Count => assert_eq!(argument, &format!("`{name} = N`")),
            Form::OneOf(choices) => {
                let quoted: Vec<String> = choices.iter().map(|c| format!("\"{c}\"")).collect();
                assert_eq!(argument, &format!("`{name} = {}`", quoted.join(" | ")));
            }
            Form::Duration => {
                let example = argument
                    .strip_prefix(&format!("`{name} = \""))
                    .and_then(|rest| rest.strip_suffix("\"`"))
                    .unwrap_or_else(|| panic!("`{name}` shows a quoted duration: {argument}"));
                assert!(
                    cronguard_schedule::parse_duration(example).is_ok(),
                    "{argument}"
                );
            }
            Form::Cron | Form::TimeZone | Form::JobName | Form::Path => {
                assert!(argument.starts_with(&format!("`{name} = \"")), "{argument}")
            }
            Form::Bool => panic!("the attribute takes flags, not `{name} = true`"),
        }
    }
}

/// The arguments of one check: the attribute's arguments without the setting and with it.
struct Case {
    without: String,
    with: String,
}

/// Writing `name = value` (or the flag `name`) changes what the attribute registers, over
/// arguments that leave it valid.
fn case(name: &str, value: Option<&str>) -> Case {
    let written = match value {
        Some(value) => format!("{name} = {value}"),
        None => name.to_owned(),
    };
    let prerequisite = match name {
        "lease" => r#", lock = "redis""#,
        "history" => r#", lock = "postgres""#,
        "backoff" => ", retries = 1",
        _ => "",
    };
    match name {
        "cron" => Case {
            without: r#"every = "1s""#.to_owned(),
            with: written,
        },
        "every" => Case {
            without: r#"every = "1h""#.to_owned(),
            with: written,
        },
        "tz" => Case {
            without: r#"cron = "0 0 * * *""#.to_owned(),
            with: format!(r#"cron = "0 0 * * *", {written}"#),
        },
        // Fires a minute apart: room for the sample jitter.
        _ => Case {
            without: format!(r#"every = "1m"{prerequisite}"#),
            with: format!(r#"every = "1m"{prerequisite}, {written}"#),
        },
    }
}

/// A value of each form that is not a default.
fn sample(form: Form) -> Vec<Option<&'static str>> {
    match form {
        Form::Cron => vec![Some(r#""0 30 2 * * *""#)],
        Form::TimeZone => vec![Some(r#""Europe/Berlin""#)],
        Form::Duration => vec![Some(r#""2s""#)],
        Form::Count => vec![Some("2")],
        Form::Flag => vec![None],
        Form::OneOf(_) => Vec::new(),
        Form::JobName => vec![Some(r#""billing::settle""#)],
        Form::Path => vec![Some(r#""my_framework::cronguard""#)],
        Form::Bool => vec![Some("true")],
    }
}

fn expand(args: &str) -> String {
    let args: TokenStream = args.parse().unwrap_or_else(|e| panic!("{args}: {e}"));
    let item: TokenStream = "async fn tick() {}".parse().expect("a function");
    let expanded = crate::expand::scheduled(args.clone(), item).to_string();
    assert!(
        !expanded.contains("compile_error"),
        "`{args}` is rejected: {expanded}"
    );
    expanded
}

/// Every argument of the table is read by the macro: each value changes what is registered
/// (the macro reads no argument that is not in the table: `Args::get` asserts it).
#[test]
fn every_argument_of_the_table_is_read() {
    for (name, setting) in attribute_settings() {
        let mut values = sample(setting.form);
        let default = setting.default.trim_matches('`');
        let choices: Vec<String> = match setting.form {
            Form::OneOf(choices) => choices
                .iter()
                .filter(|choice| **choice != default)
                .map(|choice| format!("\"{}\"", choice.replace("<name>", "billing")))
                .collect(),
            _ => Vec::new(),
        };
        values.extend(choices.iter().map(|choice| Some(choice.as_str())));
        assert!(!values.is_empty(), "`{name}`: no value to try");
        for value in values {
            let Case { without, with } = case(name, value);
            assert!(
                expand(&without) != expand(&with),
                "`{with}` registers the same job as `{without}`: the macro does not read `{name}`"
            );
        }
    }
}

/// The settings whose default the runtime applies: the macro registers "not given" for them.
const DEFAULTS_APPLIED_AT_START: &[&str] = &["backoff", "standby"];

/// Writing a documented default registers the same job as leaving the argument out.
#[test]
fn the_documented_defaults_are_the_macros() {
    let mut checked = Vec::new();
    for (name, setting) in attribute_settings() {
        let Some(default) = setting
            .default
            .strip_prefix('`')
            .and_then(|d| d.strip_suffix('`'))
            .filter(|d| !d.contains('`'))
        else {
            continue;
        };
        let value = match setting.form {
            Form::Count => default.to_owned(),
            Form::Duration | Form::TimeZone | Form::OneOf(_) | Form::Path => {
                format!("\"{default}\"")
            }
            Form::Cron | Form::JobName | Form::Flag | Form::Bool => continue,
        };
        if DEFAULTS_APPLIED_AT_START.contains(&name) {
            continue;
        }
        let Case { without, with } = case(name, Some(&value));
        assert!(
            expand(&without) == expand(&with),
            "`{with}` registers another job than `{without}`: `{default}` is not the default of `{name}`"
        );
        checked.push(name);
    }
    assert_eq!(
        checked,
        [
            "tz",
            "lock",
            "lease",
            "max_instances",
            "overlap",
            "misfire_grace",
            "retries",
            "crate"
        ]
    );
}
