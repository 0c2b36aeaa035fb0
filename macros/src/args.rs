//! Parses the attribute's arguments (`cron = "...", lock = "redis", coalesce, ...`) into raw
//! key/value pairs. Nothing here knows what a key means; `validate` does.
//!
//! The argument list is split at top-level commas first and each piece is parsed on its own, so a
//! syntax mistake in one argument does not hide the mistakes in the others.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use syn::{Ident, Lit, LitInt};

use cronguard_schedule::settings;

use crate::errors::Errors;

/// One argument as written.
pub(crate) struct Arg {
    /// The name before `=` (or the whole argument for a flag).
    pub(crate) key: Ident,
    /// What follows the name.
    pub(crate) value: Value,
}

/// What follows an argument's name.
pub(crate) enum Value {
    /// Nothing: `coalesce`.
    Flag,
    /// `key =` and then nothing.
    Missing,
    /// `key = <literal>` (strings, numbers, `true`/`false`).
    Lit(Lit),
    /// `key = -<integer>`.
    NegInt(LitInt),
    /// `key = <anything else>`: a path, an expression, several tokens.
    Other(TokenStream),
    /// Malformed; an error has already been reported.
    Invalid,
}

/// Parses the arguments, reporting syntax errors to `errors` and keeping every argument whose
/// name could be read.
pub(crate) fn parse(args: TokenStream, errors: &mut Errors) -> Vec<Arg> {
    let mut parsed = Vec::new();
    for (tokens, comma) in split_at_commas(args) {
        if tokens.is_empty() {
            // A trailing comma is fine; `a,,b` or a leading comma is not.
            if let Some(comma) = comma {
                errors.at(
                    comma,
                    "expected an argument before this `,`; arguments are separated by single commas",
                );
            }
            continue;
        }
        if let Some(arg) = parse_one(tokens, errors) {
            parsed.push(arg);
        }
    }
    parsed
}

/// Splits at commas outside any group; each piece comes with the span of the comma after it.
fn split_at_commas(args: TokenStream) -> Vec<(Vec<TokenTree>, Option<Span>)> {
    let mut pieces = Vec::new();
    let mut current = Vec::new();
    for token in args {
        match &token {
            TokenTree::Punct(punct) if punct.as_char() == ',' => {
                pieces.push((std::mem::take(&mut current), Some(punct.span())));
            }
            _ => current.push(token),
        }
    }
    if !current.is_empty() {
        pieces.push((current, None));
    }
    pieces
}

fn parse_one(tokens: Vec<TokenTree>, errors: &mut Errors) -> Option<Arg> {
    let mut tokens = tokens.into_iter().map(ungroup);
    let first = tokens.next()?;
    let key = match first {
        TokenTree::Ident(ident) => ident,
        TokenTree::Literal(literal) => {
            let text = literal.to_string();
            let fix = match syn::parse2::<Lit>(TokenTree::Literal(literal.clone()).into()) {
                Ok(Lit::Str(s)) if cronguard_schedule::parse_duration(&s.value()).is_ok() => {
                    format!("write `every = {text}`")
                }
                Ok(Lit::Str(_)) => format!("write `cron = {text}` or `every = \"...\"`"),
                _ => "write `cron = \"...\"` or `every = \"...\"`".to_owned(),
            };
            errors.at(
                literal.span(),
                format!("this value has no argument name; {fix}"),
            );
            return None;
        }
        other => {
            errors.at(
                other.span(),
                format!(
                    "expected an argument name, found `{other}`; expected one of: {}",
                    list(&settings::attributes())
                ),
            );
            return None;
        }
    };
    let rest: Vec<TokenTree> = tokens.collect();
    let value = match rest.split_first() {
        None => Value::Flag,
        Some((TokenTree::Punct(eq), value)) if eq.as_char() == '=' => parse_value(value),
        Some((other, _)) => {
            errors.at(
                other.span(),
                format!("expected `=` after `{key}`, found `{other}`; write `{key} = value`"),
            );
            Value::Invalid
        }
    };
    Some(Arg { key, value })
}

/// Unwraps the invisible groups that `macro_rules!` puts around `$x:literal` and friends.
fn ungroup(token: TokenTree) -> TokenTree {
    match token {
        TokenTree::Group(group) if group.delimiter() == Delimiter::None => {
            let mut inner = group.stream().into_iter();
            match (inner.next(), inner.next()) {
                (Some(only), None) => ungroup(only),
                _ => TokenTree::Group(group),
            }
        }
        other => other,
    }
}

fn parse_value(tokens: &[TokenTree]) -> Value {
    match tokens {
        [] => Value::Missing,
        [single @ (TokenTree::Literal(_) | TokenTree::Ident(_))] => {
            match syn::parse2::<Lit>(single.clone().into()) {
                Ok(lit) => Value::Lit(lit),
                Err(_) => Value::Other(single.clone().into()),
            }
        }
        [TokenTree::Punct(minus), TokenTree::Literal(literal)] if minus.as_char() == '-' => {
            match syn::parse2::<LitInt>(TokenTree::Literal(literal.clone()).into()) {
                Ok(int) => Value::NegInt(int),
                Err(_) => Value::Other(tokens.iter().cloned().collect()),
            }
        }
        _ => Value::Other(tokens.iter().cloned().collect()),
    }
}

/// "`a`, `b`, `c`" for error messages.
pub(crate) fn list(items: &[&str]) -> String {
    items
        .iter()
        .map(|item| format!("`{item}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "`a`, `b` or `c`" for error messages.
pub(crate) fn choices(items: &[&str]) -> String {
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or `{last}`", list(rest)),
        _ => list(items),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn parse_ok(tokens: TokenStream) -> Vec<Arg> {
        let mut errors = Errors::new();
        let args = parse(tokens, &mut errors);
        if let Err(e) = errors.finish() {
            panic!("unexpected error: {e}");
        }
        args
    }

    fn parse_err(tokens: TokenStream) -> Vec<String> {
        let mut errors = Errors::new();
        parse(tokens, &mut errors);
        match errors.finish() {
            Ok(()) => panic!("expected an error"),
            Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn reads_keys_values_and_flags() {
        let args = parse_ok(quote!(
            cron = "0 * * * * *",
            max_instances = 2,
            coalesce,
            lock = redis,
        ));
        let keys: Vec<String> = args.iter().map(|a| a.key.to_string()).collect();
        assert_eq!(keys, ["cron", "max_instances", "coalesce", "lock"]);
        assert!(matches!(&args[0].value, Value::Lit(Lit::Str(s)) if s.value() == "0 * * * * *"));
        assert!(matches!(&args[1].value, Value::Lit(Lit::Int(i)) if i.base10_digits() == "2"));
        assert!(matches!(args[2].value, Value::Flag));
        assert!(matches!(args[3].value, Value::Other(_)));
    }

    #[test]
    fn reads_missing_negative_and_expression_values() {
        let args = parse_ok(quote!(cron =, max_instances = -1, every = Duration::from_secs(1)));
        assert!(matches!(args[0].value, Value::Missing));
        assert!(matches!(&args[1].value, Value::NegInt(i) if i.base10_digits() == "1"));
        assert!(matches!(args[2].value, Value::Other(_)));
    }

    #[test]
    fn booleans_are_literals() {
        let args = parse_ok(quote!(coalesce = true));
        assert!(matches!(&args[0].value, Value::Lit(Lit::Bool(b)) if b.value));
    }

    #[test]
    fn reports_every_syntax_error() {
        let errors = parse_err(quote!(, cron: "x", "30s", lock = "file"));
        assert_eq!(errors.len(), 3);
        assert!(errors[0].starts_with("expected an argument before this `,`"));
        assert!(errors[1].starts_with("expected `=` after `cron`, found `:`"));
        assert_eq!(
            errors[2],
            "this value has no argument name; write `every = \"30s\"`"
        );
    }

    #[test]
    fn formats_lists() {
        assert_eq!(choices(&["a", "b", "c"]), "`a`, `b` or `c`");
        assert_eq!(choices(&["a"]), "`a`");
    }
}
