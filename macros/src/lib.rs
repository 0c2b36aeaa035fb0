//! The `#[scheduled]` attribute of cronguard. Use it through `cronguard::scheduled`.
//!
//! The macro checks its arguments and the function's signature at compile time (cron expressions,
//! time zones and durations with the same `cronguard-schedule` code the runtime uses), re-emits the
//! function unchanged and registers a `StaticJob` with `inventory` through
//! `::cronguard::__private`. Every mistake is reported at once, each on the offending token.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod args;
mod duration;
mod errors;
mod expand;
#[cfg(test)]
mod settings_tests;
mod validate;

use proc_macro::TokenStream;

// The table of arguments is checked against `cronguard_schedule::settings` by `settings_tests`.
#[doc = include_str!("scheduled.md")]
#[proc_macro_attribute]
pub fn scheduled(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::scheduled(args.into(), item.into()).into()
}
