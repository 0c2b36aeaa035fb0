//! Durations in attribute arguments (`every`, `lease`, `misfire_grace`), normalised to whole
//! milliseconds at compile time.

use syn::LitStr;

/// Parses `lit` with the duration rule shared with the runtime and configuration files
/// (`cronguard_schedule::parse_duration_millis`) and converts it to milliseconds.
///
/// Rejected: text that does not parse, zero, less than 1 ms, a fraction of a millisecond (it
/// would be cut off silently), and more milliseconds than fit in a `u64`.
pub(crate) fn to_millis(lit: &LitStr) -> syn::Result<u64> {
    let duration = cronguard_schedule::parse_duration_millis(&lit.value())
        .map_err(|error| syn::Error::new(lit.span(), error))?;
    u64::try_from(duration.as_millis())
        .map_err(|_| syn::Error::new(lit.span(), "the duration is too long"))
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
