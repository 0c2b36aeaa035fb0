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
/// async fn settle_orders(ctx: cronguard::JobContext, db: cronguard::State<Db>) -> anyhow::Result<()> {
///     Ok(())
/// }
/// ```
///
/// | argument | meaning | default |
/// | --- | --- | --- |
/// | `cron = "..."` | cron expression (5, 6 or 7 fields, seconds first when 6 or 7) | one of `cron`/`every` |
/// | `every = "30s"` | fixed interval, aligned to the Unix epoch | |
/// | `tz = "Area/City"` | IANA time zone of `cron` | `UTC` |
/// | `lock = "local" \| "file" \| "redis"` | the guard | `local` |
/// | `lease = "10s"` | lease of a `redis` guard | `30s` |
/// | `max_instances = N` | runs at once (`local` only) | `1` |
/// | `overlap = "skip" \| "queue" \| "replace"` | what a fire does when no slot is free | `skip` |
/// | `coalesce` | of several waiting fires run only the latest | off |
/// | `misfire_grace = "60s"` | how late a fire may still start | `60s` |
/// | `timeout = "5m"` | each run is cancelled at this deadline and reported as failed (timeout); 1 ms to 7 days | none |
/// | `retries = N` | retry a failed run under the same fire, lease and token while the next attempt fits the fire's window; at most 100 | `0` |
/// | `backoff = "10s"` | pause before the first retry, doubled per retry, capped at 1 h; needs `retries` | `1s` |
/// | `jitter = "30s"` | delay each start by a deterministic amount in `[0, jitter)` from (job, `T`); 1 ms to 24 h | none |
/// | `standby = "2s"` | a process that did not get the last fire claims the next ones this long after their start; `0s` claims at once; up to 1 h | `1s` (or `Builder::standby`) |
/// | `name = "..."` | the job's identity in locks, logs and events | `module_path::fn_name` |
/// | `crate = "..."` | the path of `cronguard` when it is re-exported or renamed | `::cronguard` |
///
/// The function may be `async fn` or a plain `fn`, take a `JobContext` and any number of
/// `State<T>` arguments (values given to `Builder::state`; `start()` fails when one is missing),
/// and return `()` or `Result<(), E: Display>`. It is kept unchanged, so tests call it directly.
/// Every mistake is a compile error on the offending token.
#[proc_macro_attribute]
pub fn scheduled(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::scheduled(args.into(), item.into()).into()
}
