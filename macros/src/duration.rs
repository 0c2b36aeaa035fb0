//! Durations in attribute arguments (`every`, `lease`, `misfire_grace`), normalised to whole
//! milliseconds at compile time.

use std::time::Duration;

use syn::LitStr;

/// Parses `lit` with the runtime's duration parser and converts it to milliseconds.
///
/// Rejected: text that does not parse, zero, less than 1 ms, a fraction of a millisecond (it
/// would be cut off silently), and more milliseconds than fit in a `u64`.
pub(crate) fn to_millis(lit: &LitStr) -> syn::Result<u64> {
    let text = lit.value();
    let duration = cronguard_schedule::parse_duration(&text)
        .map_err(|error| syn::Error::new(lit.span(), error))?;
    millis(&text, duration).map_err(|message| syn::Error::new(lit.span(), message))
}

fn millis(text: &str, duration: Duration) -> Result<u64, String> {
    const MILLI: u32 = 1_000_000;
    if duration < Duration::from_millis(1) {
        return Err(format!(
            "`{text}` is shorter than 1ms; cronguard counts durations in whole milliseconds, so give at least `1ms`"
        ));
    }
    if !duration.subsec_nanos().is_multiple_of(MILLI) {
        let down = duration.as_millis();
        return Err(format!(
            "`{text}` is not a whole number of milliseconds; cronguard counts durations in whole milliseconds, so write `{down}ms` or `{}ms`",
            down + 1
        ));
    }
    u64::try_from(duration.as_millis())
        .map_err(|_| format!("`{text}` is too long; give at most `{}ms`", u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn parse(lit: LitStr) -> Result<u64, String> {
        to_millis(&lit).map_err(|e| e.to_string())
    }

    #[test]
    fn normalises_to_millis() {
        assert_eq!(parse(parse_quote!("10s")), Ok(10_000));
        assert_eq!(parse(parse_quote!("1m 30s")), Ok(90_000));
        assert_eq!(parse(parse_quote!("250ms")), Ok(250));
        assert_eq!(parse(parse_quote!("1ms")), Ok(1));
    }

    #[test]
    fn rejects_bad_zero_and_sub_millisecond_durations() {
        assert!(parse(parse_quote!("soon")).is_err());
        assert!(parse(parse_quote!("0s")).is_err());
        let short = parse(parse_quote!("500us")).expect_err("under 1ms");
        assert!(short.contains("shorter than 1ms"), "{short}");
        let fraction = parse(parse_quote!("1500us")).expect_err("a fraction of a ms");
        assert!(fraction.contains("write `1ms` or `2ms`"), "{fraction}");
    }
}
