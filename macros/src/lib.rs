//! The `#[scheduled]` attribute of cronguard. Use it through `cronguard::scheduled`.
use proc_macro::TokenStream;

/// Turns a function into a cronguard job. See the `cronguard` crate docs.
#[proc_macro_attribute]
pub fn scheduled(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}
