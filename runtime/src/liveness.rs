//! Whether a live replica runs a job, as its store tells it: the processes that attend the store
//! (each replica, with every read of the control feed) and the replica that announced the job
//! last, for [`Store::liveness`](crate::admin::Store::liveness) and the command-line tool's
//! `trigger` (docs/operations/cli.md, "Run now needs a live replica").

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::guard::feed::{SeenProcess, PRESENCE_TTL};

/// A process attending the store — a replica, which reads the store's control feed about once a
/// second and is listed there with each read — as the store last saw it
/// ([`Store::processes`](crate::admin::Store::processes)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct StoreProcess {
    /// Its instance name (`CRONGUARD_INSTANCE`); the whole id the store holds when this version
    /// cannot read it.
    pub instance: String,
    /// Its operating-system process id, when the store's id tells it.
    pub pid: Option<u32>,
    /// How long ago it last attended, by the store's clock (a lock dir: this host's).
    pub seen_ago: Duration,
    /// Whether it is present: it attended within the last 5 s. A process that stops stays
    /// present that long; the store forgets it once another process attends after that.
    pub present: bool,
}

impl StoreProcess {
    /// A process of the id `<instance> <pid> <16 hex digits>` that replicas attend with.
    pub(crate) fn of(seen: SeenProcess) -> StoreProcess {
        let parsed = seen.id.rsplitn(3, ' ').collect::<Vec<_>>();
        let (instance, pid) = match parsed.as_slice() {
            [random, pid, instance]
                if random.len() == 16 && random.chars().all(|c| c.is_ascii_hexdigit()) =>
            {
                match pid.parse::<u32>() {
                    Ok(pid) => ((*instance).to_owned(), Some(pid)),
                    Err(_) => (seen.id.clone(), None),
                }
            }
            _ => (seen.id.clone(), None),
        };
        StoreProcess {
            instance,
            pid,
            seen_ago: seen.ago,
            present: seen.ago <= PRESENCE_TTL,
        }
    }

    /// `` `instance` pid 1234 ``, for messages.
    fn named(&self) -> String {
        match self.pid {
            Some(pid) => format!("`{}` pid {pid}", self.instance),
            None => format!("`{}`", self.instance),
        }
    }
}

/// Whether a live replica runs a job, as its store tells it
/// ([`Store::liveness`](crate::admin::Store::liveness)).
///
/// The store knows which processes attend it (each replica, about once a second) and which
/// replica announced each job last (each replica announces its jobs when it starts); it does
/// not record every job of every replica. So a job is taken to run on a live replica when a
/// process of the instance that announced it last is present.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "liveness", rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum Liveness {
    /// A process of the instance that announced the job last is present: it reads the control
    /// feed, and a run asked for reaches it.
    Live {
        /// That process.
        process: StoreProcess,
    },
    /// No process is present at the store: none reads its control feed, so a run asked for
    /// starts nowhere.
    NoProcess {
        /// The process seen last, when the store still lists one.
        last: Option<StoreProcess>,
    },
    /// Processes are present, but none of the instance that announced the job last: the store
    /// cannot tell whether one of them runs it.
    AnnouncerGone {
        /// The announcing instance's process seen last, when the store still lists one.
        announcer: Option<StoreProcess>,
        /// The processes present.
        present: Vec<StoreProcess>,
    },
}

/// A job, and whether a live replica runs it ([`Store::liveness`](crate::admin::Store::liveness)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct JobLiveness {
    /// The job's name.
    pub job: String,
    /// The replica (`CRONGUARD_INSTANCE`) that announced it last.
    pub announced_by: String,
    /// When it was announced last.
    pub announced_at: DateTime<Utc>,
    /// What the store tells of the replicas (serialized as the field `liveness`, with the
    /// processes beside it).
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub liveness: Liveness,
}

impl JobLiveness {
    /// Whether a live replica runs the job: [`Liveness::Live`].
    pub fn is_live(&self) -> bool {
        matches!(self.liveness, Liveness::Live { .. })
    }
}

/// `3 s`, `4 min 10 s`, `2 h 5 min`, `3 d 4 h`: how long ago, for messages.
fn ago(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        3600..86_400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}

/// Why [`Store::trigger_if_live`](crate::admin::Store::trigger_if_live) refused, and what to do.
pub(crate) fn refusal(l: &JobLiveness) -> String {
    let job = &l.job;
    let at = l
        .announced_at
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let anyway = "`cronguard trigger --force` asks anyway: a replica that runs the job takes the run if it reads the control feed within the job's misfire grace; one that starts later does not";
    match &l.liveness {
        Liveness::Live { .. } => format!("job `{job}` runs on a live replica"),
        Liveness::NoProcess { last: Some(last) } => format!(
            "no live replica runs job `{job}`: no process has attended this store for {} (the last was {}), so none reads its control feed; start a replica that runs the job, then ask again. {anyway}",
            ago(last.seen_ago),
            last.named()
        ),
        Liveness::NoProcess { last: None } => format!(
            "no live replica runs job `{job}`: no process attends this store (the job was announced by `{}` at {at}), so none reads its control feed; start a replica that runs the job, then ask again. {anyway}",
            l.announced_by
        ),
        Liveness::AnnouncerGone { announcer, present } => {
            const SHOWN: usize = 5;
            let mut names: Vec<String> = present
                .iter()
                .take(SHOWN)
                .map(StoreProcess::named)
                .collect();
            if present.len() > SHOWN {
                names.push(format!("{} more", present.len() - SHOWN));
            }
            let seen = announcer
                .as_ref()
                .map(|p| format!(" (last seen {} ago)", ago(p.seen_ago)))
                .unwrap_or_default();
            format!(
                "no live replica is known to run job `{job}`: `{}`, which announced it last (at {at}), is not present at this store{seen}; {} present ({}), but the store does not record which jobs each runs. If one of them runs `{job}`, ask with `cronguard trigger --force`; otherwise start a replica that runs it",
                l.announced_by,
                if present.len() == 1 {
                    "1 other process is".to_owned()
                } else {
                    format!("{} other processes are", present.len())
                },
                names.join(", ")
            )
        }
    }
}

/// What `processes` (most recently seen first) tell of a job that `announced_by` announced last.
pub(crate) fn liveness(announced_by: &str, processes: Vec<StoreProcess>) -> Liveness {
    // Most recently seen first: a present process of the instance before one that stopped.
    let announcer = processes
        .iter()
        .find(|p| p.instance == announced_by)
        .cloned();
    let present: Vec<StoreProcess> = processes.iter().filter(|p| p.present).cloned().collect();
    match announcer {
        Some(process) if process.present => Liveness::Live { process },
        _ if present.is_empty() => Liveness::NoProcess {
            last: processes.into_iter().next(),
        },
        announcer => Liveness::AnnouncerGone { announcer, present },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(id: &str, secs: u64) -> StoreProcess {
        StoreProcess::of(SeenProcess {
            id: id.to_owned(),
            ago: Duration::from_secs(secs),
        })
    }

    #[test]
    fn a_process_id_tells_the_instance_and_the_pid() {
        let p = seen("web 1 (blue) 4242 00000000deadbeef", 1);
        assert_eq!(
            (p.instance.as_str(), p.pid, p.present),
            ("web 1 (blue)", Some(4242), true)
        );
        let p = seen("host:7 7 0123456789abcdef", 6);
        assert_eq!(
            (p.instance.as_str(), p.pid, p.present),
            ("host:7", Some(7), false)
        );
        for odd in ["lonely", "a b c", "a x 0123456789abcdef"] {
            assert_eq!(
                (seen(odd, 0).instance.as_str(), seen(odd, 0).pid),
                (odd, None)
            );
        }
        assert_eq!(ago(Duration::from_secs(59)), "59 s");
        assert_eq!(ago(Duration::from_secs(250)), "4 min 10 s");
        assert_eq!(ago(Duration::from_secs(7_500)), "2 h 5 min");
        assert_eq!(ago(Duration::from_secs(273_600)), "3 d 4 h");
    }

    #[test]
    fn a_job_is_live_when_a_process_of_its_announcer_is_present() {
        let a_now = seen("a 1 0000000000000001", 1);
        let a_gone = seen("a 2 0000000000000002", 90);
        let b_now = seen("b 3 0000000000000003", 0);
        assert_eq!(
            liveness("a", vec![a_now.clone(), a_gone.clone()]),
            Liveness::Live { process: a_now }
        );
        assert_eq!(
            liveness("a", vec![a_gone.clone()]),
            Liveness::NoProcess {
                last: Some(a_gone.clone())
            }
        );
        assert_eq!(
            liveness("a", Vec::new()),
            Liveness::NoProcess { last: None }
        );
        assert_eq!(
            liveness("a", vec![b_now.clone(), a_gone.clone()]),
            Liveness::AnnouncerGone {
                announcer: Some(a_gone),
                present: vec![b_now.clone()]
            }
        );
        assert_eq!(
            liveness("c", vec![b_now.clone()]),
            Liveness::AnnouncerGone {
                announcer: None,
                present: vec![b_now]
            }
        );
    }
}
