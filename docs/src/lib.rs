#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

/// Using cronguard: from the first job to the settings of a service.
pub mod guide {
    #[doc = include_str!("../guide/first-job.md")]
    pub mod first_job {}
    #[doc = include_str!("../guide/attribute.md")]
    pub mod attribute {}
    #[doc = include_str!("../guide/state.md")]
    pub mod state {}
    #[doc = include_str!("../guide/testing.md")]
    pub mod testing {}
    #[doc = include_str!("../guide/fires.md")]
    pub mod fires {}
    #[doc = include_str!("../guide/overlap.md")]
    pub mod overlap {}
    #[doc = include_str!("../guide/downtime.md")]
    pub mod downtime {}
    #[doc = include_str!("../guide/timeouts-retries-jitter.md")]
    pub mod timeouts_retries_jitter {}
    #[doc = include_str!("../guide/controls.md")]
    pub mod controls {}
    #[doc = include_str!("../guide/selecting-jobs.md")]
    pub mod selecting_jobs {}
    #[doc = include_str!("../guide/overrides.md")]
    pub mod overrides {}
    #[doc = include_str!("../guide/settings.md")]
    pub mod settings {}
}

/// Running cronguard in production: the guards' servers, the tools, what to watch.
pub mod operations {
    #[doc = include_str!("../operations/redis.md")]
    pub mod redis {}
    #[doc = concat!(
        include_str!("../operations/postgres.md"),
        "\n```sql\n",
        include_str!("../../runtime/src/guard/postgres/schema.sql"),
        "```\n"
    )]
    pub mod postgres {}
    #[doc = include_str!("../operations/starting-while-down.md")]
    pub mod starting_while_down {}
    #[doc = include_str!("../operations/history.md")]
    pub mod history {}
    #[doc = include_str!("../operations/cli.md")]
    pub mod cli {}
    #[doc = include_str!("../operations/dashboard.md")]
    pub mod dashboard {}
    #[doc = include_str!("../operations/probes.md")]
    pub mod probes {}
    #[doc = include_str!("../operations/metrics.md")]
    pub mod metrics {}
    #[doc = include_str!("../operations/alerts.md")]
    pub mod alerts {}
    #[doc = include_str!("../operations/production-checklist.md")]
    pub mod production_checklist {}
}

/// How cronguard works, what it guarantees and how that is proven.
pub mod design {
    #[doc = include_str!("../design/job-model.md")]
    pub mod job_model {}
    #[doc = include_str!("../design/guarantees.md")]
    pub mod guarantees {}
    #[doc = include_str!("../design/simulation.md")]
    pub mod simulation {}
    #[doc = include_str!("../design/guard-contract.md")]
    pub mod guard_contract {}
    #[doc = include_str!("../design/standby.md")]
    pub mod standby {}
    #[doc = include_str!("../design/ownership.md")]
    pub mod ownership {}
    #[doc = include_str!("../design/decisions.md")]
    pub mod decisions {}
    #[doc = include_str!("../design/comparison.md")]
    pub mod comparison {}
}
