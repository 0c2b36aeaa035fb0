//! Collects every error of one expansion so that a single compile shows them all.

use proc_macro2::Span;
use quote::ToTokens;
use std::fmt::Display;

/// The errors found so far, combined into one `syn::Error` (serde_derive's `Ctxt`, simplified).
#[derive(Default)]
pub(crate) struct Errors {
    combined: Option<syn::Error>,
}

impl Errors {
    /// An empty collection.
    pub(crate) fn new() -> Self {
        Errors::default()
    }

    /// Adds an error.
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.combined {
            Some(combined) => combined.combine(error),
            None => self.combined = Some(error),
        }
    }

    /// Adds an error at `span`.
    pub(crate) fn at(&mut self, span: Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    /// Adds an error covering all of `tokens` (first to last token).
    pub(crate) fn on(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// How many errors were added.
    pub(crate) fn count(&self) -> usize {
        self.combined
            .as_ref()
            .map_or(0, |combined| combined.clone().into_iter().count())
    }

    /// `Ok` if no error was added, else all of them.
    pub(crate) fn finish(self) -> syn::Result<()> {
        match self.combined {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combines_every_error() {
        let mut errors = Errors::new();
        errors.at(Span::call_site(), "first");
        errors.at(Span::call_site(), "second");
        assert_eq!(errors.count(), 2);
        let combined = errors.finish().expect_err("two errors were pushed");
        let messages: Vec<String> = combined.into_iter().map(|e| e.to_string()).collect();
        assert_eq!(messages, ["first", "second"]);
    }
}
