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
mod validate;

use proc_macro::TokenStream;

/// Turns a function into a cronguard job that `cronguard::start()` runs on its schedule.
///
/// ```ignore
/// #[cronguard::scheduled(cron = "0 */5 * * * *", tz = "Europe/Berlin", lock = "redis", lease = "10s")]
/// async fn settle_orders(ctx: cronguard::JobContext) -> anyhow::Result<()> {
///     Ok(())
/// }
/// ```
///
/// Arguments: `cron` or `every` (one of them), `tz`, `lock`, `lease`, `max_instances`, `overlap`,
/// `coalesce`, `misfire_grace`, `name`. See the `cronguard` crate docs for their meaning.
#[proc_macro_attribute]
pub fn scheduled(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::scheduled(args.into(), item.into()).into()
}
