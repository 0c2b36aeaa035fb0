//! The metrics cronguard records, their names, their labels and the histogram buckets that suit
//! them.
//!
//! cronguard records through the [`metrics`](https://docs.rs/metrics) facade, so any exporter
//! works: install its recorder before `start()` (which describes every metric with its help text
//! and unit). With no recorder installed every update is a no-op.
//!
//! | name | kind | unit | labels |
//! | --- | --- | --- | --- |
//! | `cronguard_runs_total` | counter | count | `cronguard_job`, `outcome` = `succeeded` \| `failed` \| `cancelled` \| `retried` (a failed attempt tried again) |
//! | `cronguard_dropped_fires_total` | counter | count | `cronguard_job`, `reason` = `skipped` \| `paused` \| `misfired` \| `coalesced` \| `claimed_elsewhere` |
//! | `cronguard_run_duration_seconds` | histogram | seconds | `cronguard_job` |
//! | `cronguard_fire_lateness_seconds` | histogram | seconds | `cronguard_job` |
//! | `cronguard_claim_latency_seconds` | histogram | seconds | `cronguard_job`, `guard` (shared guards: `file`, `redis`, `postgres`, `custom`) |
//! | `cronguard_lease_renewals_total` | counter | count | `cronguard_job` |
//! | `cronguard_lease_lost_total` | counter | count | `cronguard_job` |
//! | `cronguard_guard_errors_total` | counter | count | `cronguard_job`, `kind` = `unreachable` \| `timeout` \| `refused` \| `not_replicated` \| `invalid` \| `unsupported` \| `other` |
//! | `cronguard_jobs_running` | gauge | count | `cronguard_job` |
//! | `cronguard_last_success_timestamp_seconds` | gauge | seconds (Unix time) | `cronguard_job` |
//! | `cronguard_next_fire_timestamp_seconds` | gauge | seconds (Unix time) | `cronguard_job` |
//! | `cronguard_job_overdue` | gauge | 0 or 1 | `cronguard_job` |
//! | `cronguard_clock_skew_seconds` | gauge | seconds | `guard` (`redis`, `postgres`, `custom`: the guard's clock minus this host's) |
//!
//! # The job's label is `cronguard_job`
//!
//! Every series of a job names it in the label [`JOB_LABEL`], `cronguard_job`, not `job`:
//! Prometheus attaches the labels `job` (the scrape job) and `instance` (the scraped target) to
//! every series it scrapes, and with the default `honor_labels: false` renames a scraped `job`
//! label to `exported_job`. A label `job` would then hold the scrape job's name, and every rule
//! grouped `by (job)` would lump all of cronguard's jobs together. `cronguard_job` collides with
//! nothing, so a default scrape config keeps one series per cronguard job.
//!
//! # Histogram buckets
//!
//! A Prometheus histogram (rather than a summary) adds up over replicas, but its buckets must be
//! chosen up front. [`BUCKETS`] pairs each of the three histograms' names with bounds that suit
//! it (run duration: 10 ms to 6 h; lateness: 1 ms to 10 min; claim latency: 0.5 ms to 10 s), for any exporter that takes buckets per metric. With the `prometheus` feature,
//! `prometheus_builder` returns a `metrics-exporter-prometheus` builder that already has them.
//!
//! # Example
//!
//! The buckets given to an exporter of your choice, one histogram at a time:
//!
//! ```
//! for (name, buckets) in cronguard::metrics::BUCKETS {
//!     assert!(name.starts_with("cronguard_") && name.ends_with("_seconds"));
//!     assert!(buckets.windows(2).all(|w| w[0] < w[1]));
//!     // exporter = exporter.set_buckets_for_metric(name, buckets);
//! }
//! ```

mod record;

pub(crate) use record::{clock_skew, describe, ClaimSeries, JobMetrics};

/// The label that names the job on every series of a job: `cronguard_job`.
///
/// Not `job`, which Prometheus reserves for the scrape job (see the [module docs](self)).
pub const JOB_LABEL: &str = "cronguard_job";

/// Runs that ended, by `outcome`: `succeeded`, `failed`, `cancelled`, or `retried` (a failed
/// attempt tried again). A counter.
pub(crate) const RUNS_TOTAL: &str = "cronguard_runs_total";

/// Fires that did not start here, by `reason`: `skipped`, `paused`, `misfired`, `coalesced`,
/// `claimed_elsewhere`. A counter.
pub(crate) const DROPPED_FIRES_TOTAL: &str = "cronguard_dropped_fires_total";

/// How long runs took, from start to end, in seconds. A histogram; buckets
/// [`RUN_DURATION_BUCKETS`].
pub(crate) const RUN_DURATION_SECONDS: &str = "cronguard_run_duration_seconds";

/// How late runs started (start minus the fire time), in seconds. A histogram; buckets
/// [`FIRE_LATENESS_BUCKETS`].
pub(crate) const FIRE_LATENESS_SECONDS: &str = "cronguard_fire_lateness_seconds";

/// The round trip of one claim to a shared guard, in seconds, by `guard`. A histogram; buckets
/// [`CLAIM_LATENCY_BUCKETS`].
pub(crate) const CLAIM_LATENCY_SECONDS: &str = "cronguard_claim_latency_seconds";

/// Lease renewals of running jobs. A counter.
pub(crate) const LEASE_RENEWALS_TOTAL: &str = "cronguard_lease_renewals_total";

/// Runs whose lease was lost (expired or taken). A counter.
pub(crate) const LEASE_LOST_TOTAL: &str = "cronguard_lease_lost_total";

/// Claims a shared guard could not answer, by `kind` (every retry counts): `unreachable`,
/// `timeout`, `refused`, `not_replicated`, `invalid`, `unsupported`, `other`. A counter.
pub(crate) const GUARD_ERRORS_TOTAL: &str = "cronguard_guard_errors_total";

/// Runs of the job going on in this process as tasks of their own. A gauge.
pub(crate) const JOBS_RUNNING: &str = "cronguard_jobs_running";

/// Unix time at which the job's last successful run in this process ended; absent until one
/// succeeded. A gauge.
pub(crate) const LAST_SUCCESS_TIMESTAMP_SECONDS: &str = "cronguard_last_success_timestamp_seconds";

/// Unix time of the job's next fire. A gauge.
pub(crate) const NEXT_FIRE_TIMESTAMP_SECONDS: &str = "cronguard_next_fire_timestamp_seconds";

/// 1 while the job's newest dropped fire (misfired or skipped) has no later claimed fire, else
/// 0; absent until it first turns 1. A gauge.
pub(crate) const JOB_OVERDUE: &str = "cronguard_job_overdue";

/// A shared guard's clock minus this host's, in seconds, by `guard`. A gauge, the only one
/// without [`JOB_LABEL`].
pub(crate) const CLOCK_SKEW_SECONDS: &str = "cronguard_clock_skew_seconds";

/// The name of every metric cronguard records.
pub const NAMES: &[&str] = &[
    RUNS_TOTAL,
    DROPPED_FIRES_TOTAL,
    RUN_DURATION_SECONDS,
    FIRE_LATENESS_SECONDS,
    CLAIM_LATENCY_SECONDS,
    LEASE_RENEWALS_TOTAL,
    LEASE_LOST_TOTAL,
    GUARD_ERRORS_TOTAL,
    JOBS_RUNNING,
    LAST_SUCCESS_TIMESTAMP_SECONDS,
    NEXT_FIRE_TIMESTAMP_SECONDS,
    JOB_OVERDUE,
    CLOCK_SKEW_SECONDS,
];

/// Upper bounds of the buckets of [`RUN_DURATION_SECONDS`], in seconds: from 10 ms to 6 hours,
/// with bounds at the usual timeouts (1, 5, 15, 30 minutes, 1, 2 hours), so that a quantile or an
/// alert can tell a run that nears its `timeout`.
pub(crate) const RUN_DURATION_BUCKETS: &[f64] = &[
    0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0,
];

/// Upper bounds of the buckets of [`FIRE_LATENESS_SECONDS`], in seconds: from 1 ms to 10
/// minutes. A healthy scheduler stays in the first few; a paused process, a busy runtime or a
/// slow guard shows in the seconds, and `jitter` spreads starts up to its own bound. A run never
/// starts later than its `misfire_grace` (60 s by default, a bound here).
pub(crate) const FIRE_LATENESS_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0,
];

/// Upper bounds of the buckets of [`CLAIM_LATENCY_SECONDS`], in seconds: from 0.5 ms (a store on
/// loopback) to 10 s. The Redis and PostgreSQL guards give a request 2 s, so a claim that timed
/// out lands in the 2.5 s bucket; the larger ones are for guards of your own.
pub(crate) const CLAIM_LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Each histogram's name with the upper bounds of its buckets.
pub const BUCKETS: &[(&str, &[f64])] = &[
    (RUN_DURATION_SECONDS, RUN_DURATION_BUCKETS),
    (FIRE_LATENESS_SECONDS, FIRE_LATENESS_BUCKETS),
    (CLAIM_LATENCY_SECONDS, CLAIM_LATENCY_BUCKETS),
];

/// The exporter crate of [`prometheus_builder`], so that its types (`PrometheusHandle` to render
/// the metrics) can be named at the version cronguard builds with, without a dependency of your
/// own.
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub use metrics_exporter_prometheus;

/// A Prometheus exporter with cronguard's histogram buckets ([`BUCKETS`]), so that its
/// histograms come out as `_bucket` series rather than summaries.
///
/// This returns the builder of the `metrics-exporter-prometheus` crate (0.18, re-exported as
/// [`metrics_exporter_prometheus`], its default features off) on purpose: add settings of your
/// own (global labels, buckets of your own metrics, idle timeouts) before installing it. That
/// crate is therefore part of cronguard's public API with this feature: a new major version of
/// it is a new major version of cronguard. A `set_buckets_for_metric` of your own for one of
/// cronguard's histograms replaces its buckets.
///
/// Install it before `start()` and serve [`PrometheusHandle::render`] on your `/metrics` route.
/// For the exporter's own HTTP listener instead (`install()`), turn on the exporter's
/// `http-listener` feature in your `Cargo.toml` (`metrics-exporter-prometheus = { version =
/// "0.18", features = ["http-listener"] }`).
///
/// [`PrometheusHandle::render`]: metrics_exporter_prometheus::PrometheusHandle::render
///
/// # Example
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let prometheus = cronguard::metrics::prometheus_builder().install_recorder()?;
/// let handle = cronguard::start().await?;
/// // Serve this on GET /metrics:
/// let text: String = prometheus.render();
/// # drop((handle, text));
/// # Ok(())
/// # }
/// ```
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub fn prometheus_builder() -> metrics_exporter_prometheus::PrometheusBuilder {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    BUCKETS
        .iter()
        .fold(PrometheusBuilder::new(), |builder, (name, buckets)| {
            builder
                .set_buckets_for_metric(Matcher::Full((*name).to_owned()), buckets)
                .expect("cronguard's bucket lists are not empty (checked at compile time)")
        })
}

const _: () = {
    let mut i = 0;
    while i < BUCKETS.len() {
        assert!(!BUCKETS[i].1.is_empty(), "every histogram has buckets");
        i += 1;
    }
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_bounds_rise_and_every_histogram_has_them() {
        for &(name, buckets) in BUCKETS {
            assert!(
                buckets.windows(2).all(|w| w[0] < w[1]),
                "{name}: {buckets:?}"
            );
            assert!(NAMES.contains(&name));
        }
        assert_eq!(RUN_DURATION_BUCKETS.last(), Some(&21600.0));
        assert!(FIRE_LATENESS_BUCKETS.contains(&60.0), "the default grace");
    }

    #[cfg(feature = "prometheus")]
    #[test]
    fn the_prometheus_builder_renders_cronguards_histograms_with_their_buckets() {
        let recorder = prometheus_builder().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            metrics::histogram!(RUN_DURATION_SECONDS, JOB_LABEL => "a").record(3.0);
            metrics::histogram!(CLAIM_LATENCY_SECONDS, JOB_LABEL => "a").record(0.002);
        });
        let text = handle.render();
        assert!(
            text.contains(r#"cronguard_run_duration_seconds_bucket{cronguard_job="a",le="5"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"cronguard_claim_latency_seconds_bucket{cronguard_job="a",le="0.0025"} 1"#
            ),
            "{text}"
        );
        assert!(!text.contains("quantile"), "{text}");
    }
}
