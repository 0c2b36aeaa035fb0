//! IANA time zone names, with a "did you mean" suggestion for near misses.

use chrono_tz::{Tz, TZ_VARIANTS};

use crate::TimeZoneError;

/// Parses an IANA time zone name such as `Europe/Berlin` or `UTC` (exact spelling).
///
/// A name that is not in the database fails with a [`TimeZoneError`] that suggests the closest
/// known name when there is one: the same name in other letter case (`europe/berlin`), the city
/// alone (`Berlin`, `New York`), or a name a typo or two away (`Europe/Berln`).
pub fn parse_time_zone(name: &str) -> Result<Tz, TimeZoneError> {
    name.parse::<Tz>().map_err(|_| TimeZoneError {
        name: name.to_owned(),
        suggestion: suggest(name).map(str::to_owned),
    })
}

/// Lowercases and turns spaces into underscores, as IANA names are written.
fn normalize(name: &str) -> String {
    name.trim()
        .chars()
        .map(|c| {
            if c == ' ' {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// The closest IANA name to `name`, if one is close enough to be a likely intent.
fn suggest(name: &str) -> Option<&'static str> {
    let wanted = normalize(name);
    if wanted.is_empty() || wanted.len() > 64 {
        return None;
    }
    let candidates = || TZ_VARIANTS.iter().map(|tz| tz.name());

    // 1. The same name in another case, or with spaces for underscores.
    if let Some(hit) = candidates().find(|c| c.to_ascii_lowercase() == wanted) {
        return Some(hit);
    }
    // 2. The city alone (`Berlin`), preferring canonical `Area/City` names over aliases.
    if !wanted.contains('/') {
        let mut cities = candidates().filter(|c| {
            c.rsplit('/').next().map(str::to_ascii_lowercase).as_deref() == Some(wanted.as_str())
                && c.contains('/')
        });
        if let Some(hit) = cities.next() {
            return Some(hit);
        }
    }
    // 3. A small edit distance: at most 1 for short names, up to 3 for long ones.
    let limit = (wanted.chars().count() / 5).clamp(1, 3);
    candidates()
        .map(|c| (edit_distance(&wanted, &c.to_ascii_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance between two short strings.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_parse() {
        assert_eq!(parse_time_zone("Europe/Berlin"), Ok(Tz::Europe__Berlin));
        assert_eq!(parse_time_zone("UTC"), Ok(Tz::UTC));
        assert_eq!(
            parse_time_zone("Australia/Lord_Howe"),
            Ok(Tz::Australia__Lord_Howe)
        );
    }

    #[test]
    fn suggestions() {
        let cases = [
            ("europe/berlin", Some("Europe/Berlin")),
            ("Europe/Berln", Some("Europe/Berlin")),
            ("Berlin", Some("Europe/Berlin")),
            ("New York", Some("America/New_York")),
            ("America/New York", Some("America/New_York")),
            ("utc", Some("UTC")),
            ("Mars/Olympus_Mons", None),
            ("", None),
        ];
        for (name, expected) in cases {
            let err = parse_time_zone(name).expect_err(name);
            assert_eq!(err.suggestion(), expected, "{name}");
        }
    }

    #[test]
    fn message() {
        let err = parse_time_zone("Europe/Berln").expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "unknown time zone `Europe/Berln`; use an IANA name such as `Europe/Berlin`, \
             `America/New_York` or `UTC` (did you mean `Europe/Berlin`?)"
        );
    }
}
