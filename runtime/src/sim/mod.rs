//! Deterministic simulation of many replicas (docs/design/guarantees.md).
//!
//! Each replica runs the very [`JobModel`] the runtime uses; what the executor does around it
//! (claims with a response timeout, the watchdog, runs that are never polled past their lease's
//! local deadline, drop reports) is played here on simulated time, against a simulated shared
//! guard ([`server`]) that follows the Redis guard's contract. A seed draws the job's settings and
//! the faults: request delays, replies lost after the server applied the request, client
//! timeouts, server stalls, server restarts with and without data loss, replicas paused past
//! their lease, crashed and restarted, clocks skewed by seconds to hours and stepped forward and
//! back, and every replica down at once (crashed, or stopped as at a deploy) for less or more
//! than the misfire grace, some of them back late or two at the same instant: each replica that
//! starts reads the job's fate point and reports the fires missed since (docs/guide/downtime.md).
//! With partition ownership on, a replica's shard may stall for good while its feed reader goes
//! on (docs/design/ownership.md, "A stalled shard").
//! It also draws the operators' controls — runs asked for, some in bursts, and pauses with their
//! resumes — which reach each replica through a simulated control feed, some of them late.
//! After every seed [`check`] verifies the invariants.
//!
//! `cargo test -p cronguard sim` runs the default number of seeds; `CRONGUARD_SIM_SEEDS=N` runs
//! `N`, `CRONGUARD_SIM_SEED=S` replays seed `S` alone and prints its trace, and
//! `CRONGUARD_SIM_DUMP=FILE` writes every failing seed with its broken invariants to `FILE`.

mod check;
mod server;

use smol_str::SmolStr;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use crate::control::{ManualRun, Pause};
use crate::events::{EventKind, Occurrence};
use crate::health::{judge, HealthState};
use crate::model::spread::{Owner, Present};
use crate::model::{
    Action, Answer, JobModel, MissedFires, Now, Reported, RunEnd, RunId, Settings, Spec, Verdict,
};
use crate::options::{Lock, Overlap};
use cronguard_schedule::Schedule;
use server::{JobState, Ms, Req, Resp};

/// The client's response timeout (the Redis guard's connection manager).
const RESPONSE_TIMEOUT: Ms = 2_000;
/// How long a drop report waits for the guard (as the executor).
const REPORT_TIMEOUT: Ms = 1_000;
/// How often a claim is given up before the executor stops asking (as the executor).
const ABANDON_ATTEMPTS: u32 = crate::model::ABANDON_ATTEMPTS;
/// How long one read of the fate point or one report of missed fires may take (as the executor).
const ASK_TIMEOUT: Ms = 2_000;
/// The first pause between two reads of the fate point while the store does not answer; it
/// doubles up to [`MAX_POINT_PAUSE`] (as the executor).
const FIRST_POINT_PAUSE: Ms = 100;
const MAX_POINT_PAUSE: Ms = 5_000;
/// How often a report of missed fires is sent before the process reports them on its own word,
/// with 200 ms more between each two (as the executor).
const MISSED_TRIES: u32 = crate::executor::REPORT_TRIES;
/// How long the simulated service runs before it is shut down.
const RUN_FOR: Ms = 120_000;
/// The shutdown timeout of each replica.
const SHUTDOWN_TIMEOUT: Ms = 10_000;
/// How long runs cancelled at the shutdown deadline get to stop before the process exits.
const CANCEL_GRACE: Ms = 1_000;

fn epoch() -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(1_767_225_600, 0).unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
}

fn wall(ms: Ms) -> DateTime<Utc> {
    epoch() + TimeDelta::milliseconds(ms)
}

fn ms_of(t: DateTime<Utc>) -> Ms {
    (t - epoch()).num_milliseconds()
}

/// The job and the faults of one seed.
#[derive(Debug, Clone)]
pub(super) struct Scenario {
    pub(super) period: Ms,
    pub(super) grace: Ms,
    pub(super) lease: Ms,
    pub(super) work: Ms,
    pub(super) steps: u32,
    pub(super) overlap: Overlap,
    pub(super) coalesce: bool,
    pub(super) replicas: usize,
    /// Each replica's clock offset at start.
    pub(super) skew: Vec<Ms>,
    pub(super) delay_max: Ms,
    /// Chance in 1,000 that a message is held up past the response timeout.
    pub(super) spike_per_mille: u32,
    /// Chance in 1,000 that a reply is lost after the server applied the request.
    pub(super) loss_per_mille: u32,
    pub(super) faults: Vec<(Ms, Fault)>,
    /// How long a replica that did not get the last fire waits before it claims.
    pub(super) standby: Ms,
    /// The replica the processes present name first for the job (docs/design/standby.md): the
    /// replicas know it from its first start on, and for the rest of the run,
    /// even while it is paused or down (the worst a stale list can do); `None`: never known, as
    /// with a custom guard.
    pub(super) named: Option<usize>,
    /// How long before a fire's start a replica may claim it (docs/design/standby.md); the
    /// model takes at most a quarter of the lease, as the executor does.
    pub(super) claim_ahead: Ms,
    /// The operators' controls, at true times, each with the delay after which each replica
    /// reads it from the control feed.
    pub(super) controls: Vec<(Ms, Control, [Ms; MAX_REPLICAS])>,
    /// Partition ownership (docs/design/ownership.md): the partition lease, when on. Each
    /// replica renews it, or asks for it, every [`OWN_EVERY`]; the one its members name first
    /// asks for it, and the others leave the job's fires to a live owner.
    pub(super) ownership: Option<Ms>,
}

/// How often a replica renews or asks for the partition (its feed reader's period).
const OWN_EVERY: Ms = 1_000;
/// How long a replica stays a member after it last asked (`MEMBER_TTL`).
const MEMBER_TTL: Ms = 2_000;
/// How far a replica's clock may be off the store's for it to own (`OWNER_CLOCK_TOLERANCE`).
const OWNER_CLOCK_TOLERANCE: Ms = 1_000;

/// An operator's control, made as the CLI makes it: a pause or resume is written to the store
/// and published on the control feed together; a run asked for is published only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Control {
    RunNow { id: u64 },
    Pause,
    Resume,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    Pause {
        replica: usize,
        length: Ms,
    },
    Crash {
        replica: usize,
        down: Ms,
    },
    ClockStep {
        replica: usize,
        by: Ms,
    },
    ServerStall {
        length: Ms,
    },
    ServerRestart {
        down: Ms,
        lose_data: bool,
    },
    /// The server's clock steps by `by` (an NTP step, a failover to a server whose clock is
    /// off): a step back leaves the last claim ahead of it (docs/operations/redis.md).
    ServerClockStep {
        by: Ms,
    },
    /// One replica is stopped as at a rolling deploy (the scheduler stops, runs go on until the
    /// shutdown deadline, the process exits once idle) and starts again `down` later, while the
    /// others go on.
    Stop {
        replica: usize,
        down: Ms,
    },
    /// The replica's shard stalls for good (code that blocks its thread; docs/design/ownership.md,
    /// "A stalled shard"): its jobs' side is gone as in a crash, while its feed reader goes on at
    /// `phase` into each second — a member of the group that renews its partition, until it sees
    /// the stall and leaves.
    Stall {
        replica: usize,
        phase: Ms,
    },
    /// Every replica goes down at once (docs/guide/downtime.md): crashed, or stopped as at the end
    /// of the run (`graceful`: the scheduler stops, runs go on until the shutdown deadline, and
    /// the process exits once nothing is going on). Replica `r` starts again `down` plus
    /// `restarts[r]` after it went down (or once it exited, if it drains longer).
    AllDown {
        down: Ms,
        graceful: bool,
        restarts: [Ms; MAX_REPLICAS],
    },
}

/// The most replicas a seed draws.
const MAX_REPLICAS: usize = 4;

impl Scenario {
    pub(super) fn draw(seed: u64) -> Scenario {
        let mut rng = fastrand::Rng::with_seed(seed);
        let period = [1_000, 2_000, 5_000][rng.usize(0..3)];
        let grace = (period * rng.i64(1..=6) / 2).max(500);
        let lease = [1_000, 2_000, 5_000, 10_000][rng.usize(0..4)];
        let work = rng.i64(0..=period * 2);
        let replicas = rng.usize(2..=MAX_REPLICAS);
        let mut skew = vec![rng.i64(-50..=50)];
        for _ in 1..replicas {
            skew.push(match rng.u32(0..10) {
                0..=5 => rng.i64(-500..=500),
                6 | 7 => rng.i64(-30_000..=30_000),
                _ => rng.i64(-5 * 3_600_000..=5 * 3_600_000),
            });
        }
        let mut faults = Vec::new();
        let at = |rng: &mut fastrand::Rng| rng.i64(3_000..RUN_FOR - 10_000);
        for replica in 0..replicas {
            for _ in 0..rng.usize(0..=2) {
                let length = rng.i64(100..=lease * 3 + period * 2);
                faults.push((at(&mut rng), Fault::Pause { replica, length }));
            }
            // Replica 0's clock stays right; it may crash (drawn last, below).
            if replica > 0 && rng.bool() {
                let down = rng.i64(500..=5_000);
                faults.push((at(&mut rng), Fault::Crash { replica, down }));
            }
            if replica > 0 && rng.u32(0..4) == 0 {
                let by = match rng.bool() {
                    true => rng.i64(-3_600_000..=3_600_000),
                    false => rng.i64(-5_000..=5_000),
                };
                faults.push((at(&mut rng), Fault::ClockStep { replica, by }));
            }
        }
        for _ in 0..rng.usize(0..=2) {
            let length = rng.i64(500..=6_000);
            faults.push((at(&mut rng), Fault::ServerStall { length }));
        }
        if rng.u32(0..3) == 0 {
            let down = rng.i64(200..=3_000);
            let lose_data = rng.bool();
            faults.push((at(&mut rng), Fault::ServerRestart { down, lose_data }));
        }
        let standby = match rng.u32(0..3) {
            0 => 0,
            1 => rng.i64(1..=300),
            _ => rng.i64(300..=3_000),
        };
        let named = (rng.u32(0..3) != 0).then(|| rng.usize(0..replicas));
        // Drawn last, so that the seeds drawn before claims ahead keep their other settings.
        let claim_ahead = match rng.u32(0..3) {
            0 => 0,
            1 => rng.i64(1..=100),
            _ => rng.i64(100..=500),
        };
        let steps = rng.u32(1..=5);
        let overlap = [Overlap::Skip, Overlap::Queue, Overlap::Replace][rng.usize(0..3)];
        let coalesce = rng.bool();
        let delay_max = rng.i64(1..=300);
        let spike_per_mille = rng.u32(0..=20);
        let loss_per_mille = rng.u32(0..=100);
        // Drawn after everything else, so that the seeds drawn before keep their other settings:
        // replica 0 may crash too, and every replica may be down at once.
        if rng.bool() {
            let down = rng.i64(500..=5_000);
            faults.push((at(&mut rng), Fault::Crash { replica: 0, down }));
        }
        for _ in 0..rng.usize(0..=2) {
            if let Some(fault) = Scenario::draw_all_down(&mut rng, period, grace, replicas) {
                faults.push(fault);
            }
        }
        // Drawn after everything else, so that the seeds drawn before keep their other settings:
        // rolling restarts, and the server's clock stepping.
        for replica in 0..replicas {
            if rng.u32(0..3) == 0 {
                let down = rng.i64(100..=4_000);
                faults.push((at(&mut rng), Fault::Stop { replica, down }));
            }
        }
        if rng.u32(0..4) == 0 {
            if rng.bool() {
                // A small step either way, as NTP makes.
                let by = rng.i64(-3_000..=3_000);
                faults.push((at(&mut rng), Fault::ServerClockStep { by }));
            } else {
                // Ahead for a while, then set right (a clock corrected, a failover back): the
                // claims made meanwhile lie ahead of the server's clock (fault of
                // docs/operations/redis.md: a claim is not granted twice).
                let by = rng.i64(3_000..=60_000);
                let (a, b) = (at(&mut rng), at(&mut rng));
                faults.push((a.min(b), Fault::ServerClockStep { by }));
                faults.push((a.max(b) + 1, Fault::ServerClockStep { by: -by }));
            }
        }
        faults.sort_by_key(|(t, _)| *t);
        // Drawn last, so that the seeds drawn before keep their other settings: runs asked for
        // and pauses.
        let controls = Scenario::draw_controls(&mut rng, period, grace);
        // Drawn last, so that the seeds drawn before keep their other settings.
        let ownership = (rng.u32(0..2) == 0).then(|| [2_000, 3_000, 5_000][rng.usize(0..3)]);
        // Drawn last, so that the seeds drawn before keep their other settings: a shard stalled
        // for good while its process goes on renewing its partitions.
        if ownership.is_some() && rng.u32(0..4) == 0 {
            let replica = rng.usize(0..replicas);
            let phase = rng.i64(0..OWN_EVERY);
            faults.push((at(&mut rng), Fault::Stall { replica, phase }));
            faults.sort_by_key(|(t, _)| *t);
        }
        Scenario {
            period,
            grace,
            lease,
            work,
            steps,
            overlap,
            coalesce,
            replicas,
            skew,
            delay_max,
            spike_per_mille,
            loss_per_mille,
            faults,
            standby,
            named,
            claim_ahead,
            controls,
            ownership,
        }
    }

    /// Runs asked for (some in a burst of more than eight within a second), and pauses with
    /// their resumes (some never resumed); each read by each replica after its own delay: most
    /// within a second, some seconds late, some past the grace.
    fn draw_controls(
        rng: &mut fastrand::Rng,
        period: Ms,
        grace: Ms,
    ) -> Vec<(Ms, Control, [Ms; MAX_REPLICAS])> {
        let mut made = Vec::new();
        let at = |rng: &mut fastrand::Rng| rng.i64(3_000..RUN_FOR - 10_000);
        if rng.u32(0..4) == 0 {
            return Vec::new();
        }
        for _ in 0..rng.usize(0..=4) {
            made.push((at(rng), Control::RunNow { id: rng.u64(1..) }));
        }
        if rng.u32(0..4) == 0 {
            let from = at(rng);
            for _ in 0..rng.usize(9..=14) {
                made.push((
                    from + rng.i64(0..1_000),
                    Control::RunNow { id: rng.u64(1..) },
                ));
            }
        }
        for _ in 0..rng.usize(0..=2) {
            let from = at(rng);
            made.push((from, Control::Pause));
            if rng.u32(0..5) != 0 {
                let length = rng.i64(1..=grace + 4 * period);
                made.push((from + length, Control::Resume));
            }
        }
        made.sort_by_key(|(t, _)| *t);
        made.into_iter()
            .map(|(t, control)| {
                let mut delays = [0; MAX_REPLICAS];
                for d in &mut delays {
                    *d = match rng.u32(0..10) {
                        0..=6 => rng.i64(0..=1_000),
                        7 | 8 => rng.i64(1_000..=5_000),
                        _ => rng.i64(grace..=grace + 3 * period),
                    };
                }
                (t, control, delays)
            })
            .collect()
    }

    /// A downtime of every replica: shorter or longer than the grace, crashed or stopped, each
    /// replica back within 300 ms of the others — or one of them late, or two at the same
    /// instant. It ends early enough that the fires of the gap are checked (see [`check`]).
    fn draw_all_down(
        rng: &mut fastrand::Rng,
        period: Ms,
        grace: Ms,
        replicas: usize,
    ) -> Option<(Ms, Fault)> {
        let down = match rng.bool() {
            true => rng.i64(100..grace),
            false => rng.i64(grace..=grace + 4 * period),
        };
        let graceful = rng.bool();
        let mut restarts = [0; MAX_REPLICAS];
        for r in &mut restarts {
            *r = rng.i64(0..=300);
        }
        if rng.u32(0..3) == 0 {
            restarts[rng.usize(0..replicas)] += rng.i64(grace / 2..=grace + 2 * period);
        }
        if rng.u32(0..3) == 0 {
            let (a, b) = (rng.usize(0..replicas), rng.usize(0..replicas));
            restarts[b] = restarts[a];
        }
        let back = down + restarts.iter().max().copied().unwrap_or(0);
        let latest = RUN_FOR - back - 2 * grace - 20_000;
        let at = rng.i64(3_000..=latest.max(3_000));
        let fault = Fault::AllDown {
            down,
            graceful,
            restarts,
        };
        (latest > 3_000).then_some((at, fault))
    }

    fn spec(&self) -> Spec {
        Spec::new(
            SmolStr::from("sim"),
            Settings {
                schedule: Schedule::every(Duration::from_millis(self.period as u64))
                    .unwrap_or_else(|_| unreachable_schedule()),
                misfire_grace: Duration::from_millis(self.grace as u64),
                max_instances: 1,
                lock: Lock::Redis,
                overlap: self.overlap,
                coalesce: self.coalesce,
                enabled: true,
                limits: crate::model::limits::Limits::default(),
                standby: Duration::from_millis(self.standby as u64),
                claim_ahead: Duration::from_millis(self.claim_ahead.min(self.lease / 4) as u64),
                overrides: None,
            },
        )
    }
}

fn unreachable_schedule() -> Schedule {
    Schedule::every(Duration::from_secs(1)).unwrap_or_else(|_| panic!("a 1 s interval is valid"))
}

/// What the checker reads: everything that happened, on true time.
#[derive(Debug, Default)]
pub(super) struct Record {
    /// (true time, replica, incarnation, fire, fencing token) of every start, in order.
    pub(super) starts: Vec<Start>,
    /// Every step a run's body took: (true time, run key).
    pub(super) steps: Vec<(Ms, RunKey)>,
    /// Every event a replica emitted: (true time, replica, incarnation, event).
    pub(super) events: Vec<(Ms, usize, u32, Occurrence)>,
    /// Health verdicts.
    pub(super) health: Vec<HealthRecord>,
    /// Instants at which the server lost its data.
    pub(super) data_losses: Vec<Ms>,
    /// Every drop report the server recorded: (true time, fire).
    pub(super) reports_applied: Vec<(Ms, Ms)>,
    /// The server's clock steps: (true time, by).
    pub(super) server_steps: Vec<(Ms, Ms)>,
    /// When the server stalled or was down: (from, until).
    pub(super) outages: Vec<(Ms, Ms)>,
    /// Every claim sent: (true time, fire, replica).
    pub(super) claims: Vec<(Ms, Ms, usize)>,
    /// Every claim of a scheduled fire the server granted: (true time, fire).
    pub(super) taken: Vec<(Ms, Ms)>,
    /// Every claim the server answered busy or paused — a decision that drops the fire or makes
    /// it wait: (the server's clock, fire, true time).
    pub(super) decided: Vec<(Ms, Ms, Ms)>,
    /// When each replica was frozen: (replica, from, until).
    pub(super) pauses: Vec<(usize, Ms, Ms)>,
    /// Fires whose claim or report was in flight when their replica crashed.
    pub(super) crash_lost: Vec<Ms>,
    /// Every report of missed fires the server recorded: (true time, replica, incarnation, fate
    /// point before, first and last missed fire).
    pub(super) missed_applied: Vec<(Ms, usize, u32, Option<Ms>, Ms, Ms)>,
    /// Every first report of a dropped fire that the guard decided (a busy skip, an answered
    /// report): (true time, replica, incarnation, fire).
    pub(super) guard_reports: Vec<(Ms, usize, u32, Ms)>,
    /// Drop reports the server answered first without recording them (replica, incarnation,
    /// fire): the fire lay further ahead of its clock than a claim may.
    pub(super) unrecorded: std::collections::BTreeSet<(usize, u32, Ms)>,
    /// Drop reports a process made on its own word (replica, incarnation, fire): the guard did not
    /// answer, or answered without a record (a clock ahead).
    pub(super) own_word: std::collections::BTreeSet<(usize, u32, Ms)>,
    /// Every answer to a report of missed fires that reached the model (after its tries).
    pub(super) missed_heard: Vec<MissedHeard>,
    /// When the store got its first record of the job (at the start, or after a data loss).
    pub(super) first_records: Vec<Ms>,
    /// When no replica ran the job — each was down or its clock far off (see `Sim::honest`):
    /// (from, until); `until` is the first start of a replica with a sane clock after it.
    pub(super) all_down: Vec<(Ms, Ms)>,
    /// When no replica ran the job awake with its walk done: a gap, every replica that runs it
    /// frozen, or the one that started again not yet past its walk (from, until).
    pub(super) unattended: Vec<(Ms, Ms)>,
    /// Every run asked for: (true time it was published, id).
    pub(super) requests: Vec<(Ms, u64)>,
    /// Every run asked for that a replica's model took from the feed: (true time, replica,
    /// incarnation, id).
    pub(super) triggered: Vec<(Ms, usize, u32, u64)>,
    /// Manual runs whose claim was in flight, or sent and never answered, when their replica
    /// went down.
    pub(super) manual_crash_lost: Vec<u64>,
    /// When each incarnation of a replica ended: (true time, replica, incarnation).
    pub(super) ends: Vec<(Ms, usize, u32)>,
    /// When the server's state said the job was paused: (from, until).
    pub(super) paused: Vec<(Ms, Ms)>,
    /// Claims of scheduled fires the server granted anew while its state said paused: (true
    /// time, fire).
    pub(super) paused_grants: Vec<(Ms, Ms)>,
    pub(super) stop_at: Ms,
    /// The fires each replica up at the stop had left to a partition's owner and not walked (a
    /// stopping process does not walk them), and those its stop left waiting, recording nothing:
    /// the next start's walk finds them.
    pub(super) left_at_stop: Vec<(usize, Vec<Ms>)>,
    /// The replicas whose process was gone at the stop.
    pub(super) down_at_stop: Vec<usize>,
    /// The fires waiting, due and not started, in a shard when it stalled for good: (replica,
    /// fire).
    pub(super) stalled_open: Vec<(usize, Ms)>,
    /// The job's fate point in the store at the stop: the next start walks the fires after it.
    pub(super) fate_point_at_stop: Option<Ms>,
    pub(super) trace: Vec<String>,
}

/// A health verdict of a replica.
#[derive(Debug, Clone)]
pub(super) struct HealthRecord {
    /// True time.
    pub(super) at: Ms,
    pub(super) replica: usize,
    /// The replica's clock.
    pub(super) local: Ms,
    /// The fire the model says should have started by now.
    pub(super) due: Option<Ms>,
    pub(super) state: HealthState,
    /// The model had the store's fate point (or reads none).
    pub(super) point_known: bool,
}

/// The answer to a report of missed fires, as the model heard it.
#[derive(Debug, Clone)]
pub(super) struct MissedHeard {
    pub(super) at: Ms,
    pub(super) replica: usize,
    pub(super) incarnation: u32,
    pub(super) first: Ms,
    pub(super) last: Ms,
    /// The fate point the guard found before, or why it could not record them.
    pub(super) before: Result<Option<Ms>, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct RunKey {
    pub(super) replica: usize,
    pub(super) incarnation: u32,
    pub(super) run: RunId,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Start {
    pub(super) at: Ms,
    pub(super) key: RunKey,
    pub(super) fire: Ms,
    pub(super) token: u64,
    /// When its claim was sent: the guard may count the fire as run from about then on.
    pub(super) claimed: Ms,
    /// The starting replica's clock at the start.
    pub(super) local: Ms,
    /// The id of a manual run (then `fire` is its request as claimed).
    pub(super) manual: Option<u64>,
}

#[derive(Debug, Clone)]
enum Ev {
    Timer {
        r: usize,
        inc: u32,
    },
    Wake {
        r: usize,
        inc: u32,
    },
    ToServer {
        r: usize,
        inc: u32,
        id: u64,
        req: Req,
        epoch: u32,
    },
    ToClient {
        r: usize,
        inc: u32,
        id: u64,
        resp: Option<Resp>,
    },
    Timeout {
        r: usize,
        inc: u32,
        id: u64,
    },
    Step {
        r: usize,
        inc: u32,
        run: RunId,
    },
    Renew {
        r: usize,
        inc: u32,
        run: RunId,
    },
    /// The replica renews or asks for the partition (docs/design/ownership.md).
    Own {
        r: usize,
        inc: u32,
    },
    /// Reads the fate point again after a pause.
    AskFatePoint {
        r: usize,
        inc: u32,
        pause: Ms,
    },
    /// Sends a report of missed fires again.
    AskMissed {
        r: usize,
        inc: u32,
        missed: MissedFires,
        attempt: u32,
    },
    /// A replica that stopped for a downtime exits: now if it is idle, at once when `force`.
    Exit {
        r: usize,
        inc: u32,
        force: bool,
    },
    /// The shutdown deadline of a replica that stopped for a downtime.
    CancelRuns {
        r: usize,
        inc: u32,
    },
    Fault(Fault),
    /// An operator makes control `c` of the scenario.
    Control {
        c: usize,
    },
    /// The replica's feed reader reads control `c`, published at `published`.
    Feed {
        r: usize,
        inc: u32,
        c: usize,
        published: Ms,
    },
    Restart {
        r: usize,
    },
    ServerUp,
    /// A replica's pause may have ended: a gap ends if it runs the job again.
    PauseEnd {
        r: usize,
    },
    Health,
    Stop,
    CancelAll,
    /// The feed reader of incarnation `inc` of replica `r`, whose shard stalled at `stalled`:
    /// `looked` is when it last ran (see [`Fault::Stall`]).
    StalledReader {
        r: usize,
        inc: u32,
        stalled: Ms,
        looked: Ms,
    },
}

impl Ev {
    /// The replica whose process handles the event, if any (a paused one handles it later).
    fn replica(&self) -> Option<usize> {
        match self {
            Ev::Timer { r, .. }
            | Ev::Wake { r, .. }
            | Ev::ToClient { r, .. }
            | Ev::Timeout { r, .. }
            | Ev::Step { r, .. }
            | Ev::Renew { r, .. }
            | Ev::AskFatePoint { r, .. }
            | Ev::Own { r, .. }
            | Ev::AskMissed { r, .. }
            | Ev::Exit { r, .. }
            | Ev::CancelRuns { r, .. }
            | Ev::Feed { r, .. } => Some(*r),
            _ => None,
        }
    }

    fn incarnation(&self) -> Option<u32> {
        match self {
            Ev::Timer { inc, .. }
            | Ev::Wake { inc, .. }
            | Ev::ToClient { inc, .. }
            | Ev::Timeout { inc, .. }
            | Ev::Step { inc, .. }
            | Ev::Renew { inc, .. }
            | Ev::AskFatePoint { inc, .. }
            | Ev::Own { inc, .. }
            | Ev::AskMissed { inc, .. }
            | Ev::Exit { inc, .. }
            | Ev::CancelRuns { inc, .. }
            | Ev::Feed { inc, .. }
            | Ev::ToServer { inc, .. } => Some(*inc),
            _ => None,
        }
    }
}

#[derive(Debug)]
enum Pending {
    Claim {
        fire: Ms,
        sent: Ms,
    },
    Manual {
        id: u64,
        sent: Ms,
    },
    Renew {
        run: RunId,
        sent: Ms,
    },
    Report {
        fire: DateTime<Utc>,
        kind: EventKind,
    },
    Abandon {
        fire: Ms,
        attempt: u32,
    },
    /// A read of the fate point; the next one waits `pause` if it gets no answer.
    FatePoint {
        pause: Ms,
    },
    Missed {
        missed: MissedFires,
        attempt: u32,
    },
    /// A request for the partition, sent at `sent`.
    Own {
        sent: Ms,
    },
    Other,
}

struct Lease {
    token: String,
    fence: u64,
    sent: Ms,
}

struct SimRun {
    id: RunId,
    lease: Lease,
    /// The local deadline of the lease, in true time (monotonic clocks run at true rate).
    deadline: Ms,
    steps_left: u32,
    cancelled: bool,
    cancel_told: bool,
    started: Ms,
}

struct Replica {
    inc: u32,
    alive: bool,
    nonce: u64,
    /// Where this incarnation's random numbers come from (the jitter of its claim retries).
    seed: u64,
    skew: Ms,
    paused_until: Ms,
    model: JobModel,
    pending: BTreeMap<u64, Pending>,
    pending_lease: Option<Lease>,
    /// Fires whose claim was sent and never answered (timed out): the server may still apply it.
    unanswered: std::collections::BTreeSet<Ms>,
    /// The same for manual runs, by id.
    unanswered_manual: std::collections::BTreeSet<u64>,
    runs: Vec<SimRun>,
    timer_at: Option<Ms>,
    wake_at: Option<Ms>,
    /// The latest instant a request of this replica reaches the server, and a reply reaches it:
    /// one connection keeps its order.
    to_server_fifo: Ms,
    to_client_fifo: Ms,
    stopping: bool,
    /// The model has the store's fate point, or reads none (it knows of the fires before its
    /// start).
    point_known: bool,
    /// Reports of missed fires sent and not yet answered to the model (also between two tries).
    missed_out: Vec<MissedFires>,
    /// Stopped for a downtime: the process exits once idle, or at its shutdown deadline.
    draining: bool,
    /// A restart came while the process was still draining: it starts again once it exited.
    restart_after_exit: bool,
    /// Down for a downtime until then: an earlier restart (after a crash) does not happen.
    down_until: Ms,
    /// Who owns the partition as this incarnation last heard: itself or not, until when (true
    /// time: monotonic clocks run at true rate), and since when (its epoch, the server's clock).
    owner_view: Option<(bool, Ms, Ms)>,
    /// The members the store listed at its last answer.
    members: Vec<String>,
    /// Its clock was off the store's at the last answer: it does not own the partition.
    clock_off: bool,
    /// The live owner and its epoch at the last answer.
    owner_seen: Option<(String, u64)>,
    /// The owner's clock when it sent its last renewal, at the last answer.
    owner_renewed: Option<Ms>,
    /// When its last request for the partition was answered or failed (true time).
    owner_asked: Ms,
}

pub(super) struct Sim {
    sc: Scenario,
    rng: fastrand::Rng,
    now: Ms,
    seq: u64,
    queue: BinaryHeap<Reverse<(Ms, u64)>>,
    events: BTreeMap<u64, Ev>,
    next_id: u64,
    replicas: Vec<Replica>,
    server: JobState,
    server_stalled_until: Ms,
    server_down_until: Ms,
    /// Counts server restarts: a request queued before one is lost with its connection.
    server_epoch: u32,
    /// How far the server's clock is off true time (its steps: [`Fault::ServerClockStep`]).
    server_skew: Ms,
    actions: Vec<Action>,
    pub(super) record: Record,
    tracing: bool,
    /// The replica named first has started: the replicas know it ([`Scenario::named`]).
    named_known: bool,
    /// Since when every replica is down, while they are.
    all_down_since: Option<Ms>,
    /// The latest instant each replica reads a control from the feed: the feed keeps its order.
    feed_fifo: Vec<Ms>,
    unattended_since: Option<Ms>,
}

impl Sim {
    pub(super) fn new(seed: u64, tracing: bool) -> Sim {
        Sim::with(seed, Scenario::draw(seed), tracing)
    }

    /// A simulation of `sc`, its randomness drawn from `seed`.
    pub(super) fn with(seed: u64, sc: Scenario, tracing: bool) -> Sim {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x5eed);
        let mut sim = Sim {
            replicas: Vec::new(),
            rng: fastrand::Rng::with_seed(rng.u64(..)),
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            next_id: 0,
            server: JobState::default(),
            server_stalled_until: 0,
            server_down_until: 0,
            server_epoch: 0,
            server_skew: 0,
            actions: Vec::new(),
            record: Record::default(),
            tracing,
            named_known: false,
            all_down_since: None,
            feed_fifo: vec![0; sc.replicas],
            unattended_since: None,
            sc,
        };
        for r in 0..sim.sc.replicas {
            let seed = rng.u64(..);
            let model = JobModel::new(sim.sc.spec());
            sim.replicas.push(Replica {
                inc: 0,
                alive: false,
                nonce: rng.u64(..),
                seed,
                skew: sim.sc.skew[r],
                paused_until: 0,
                model,
                pending: BTreeMap::new(),
                pending_lease: None,
                unanswered: Default::default(),
                unanswered_manual: Default::default(),
                runs: Vec::new(),
                timer_at: None,
                wake_at: None,
                to_server_fifo: 0,
                to_client_fifo: 0,
                stopping: false,
                point_known: false,
                missed_out: Vec::new(),
                draining: false,
                restart_after_exit: false,
                down_until: 0,
                owner_view: None,
                members: Vec::new(),
                clock_off: false,
                owner_seen: None,
                owner_renewed: None,
                owner_asked: 0,
            });
        }
        for (at, fault) in sim.sc.faults.clone() {
            sim.push(at, Ev::Fault(fault));
        }
        for c in 0..sim.sc.controls.len() {
            let at = sim.sc.controls[c].0;
            sim.push(at, Ev::Control { c });
        }
        for r in 0..sim.sc.replicas {
            let start = rng.i64(0..2_000);
            sim.push(start, Ev::Restart { r });
        }
        let mut t = 0;
        while t < RUN_FOR + SHUTDOWN_TIMEOUT {
            t += 250;
            sim.push(t, Ev::Health);
        }
        sim.push(RUN_FOR, Ev::Stop);
        sim.push(RUN_FOR + SHUTDOWN_TIMEOUT, Ev::CancelAll);
        sim.record.stop_at = RUN_FOR;
        sim
    }

    pub(super) fn scenario(&self) -> &Scenario {
        &self.sc
    }

    fn push(&mut self, at: Ms, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq)));
        self.events.insert(self.seq, ev);
    }

    fn trace(&mut self, what: impl FnOnce() -> String) {
        if self.tracing {
            let line = format!("{:>8} ms  {}", self.now, what());
            self.record.trace.push(line);
        }
    }

    fn local_now(&self, r: usize) -> Now {
        Now {
            wall: wall(self.now + self.replicas[r].skew),
            mono: Duration::from_millis(self.now.max(0) as u64),
            random: self.replicas[r].seed ^ (self.now as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        }
    }

    /// Runs the simulation to its end.
    pub(super) fn run(&mut self) {
        let limit = RUN_FOR + SHUTDOWN_TIMEOUT + 60_000;
        while let Some(Reverse((at, seq))) = self.queue.pop() {
            let Some(ev) = self.events.remove(&seq) else {
                continue;
            };
            if at > limit {
                break;
            }
            self.now = at;
            if let Some(r) = ev.replica() {
                let rep = &self.replicas[r];
                if Some(rep.inc) != ev.incarnation() || !rep.alive {
                    continue;
                }
                if rep.paused_until > self.now {
                    let until = rep.paused_until;
                    self.push(until, ev);
                    continue;
                }
            }
            self.handle(ev);
        }
    }

    fn handle(&mut self, ev: Ev) {
        let draining = ev.replica().filter(|r| self.replicas[*r].draining);
        self.handle_one(ev);
        // A process stopped for a downtime exits as soon as nothing of the job is going on.
        if let Some(r) = draining {
            let rep = &self.replicas[r];
            if rep.alive && rep.draining && !rep.model.busy() {
                self.exit(r);
            }
        }
    }

    fn handle_one(&mut self, ev: Ev) {
        match ev {
            Ev::Timer { r, .. } => {
                self.replicas[r].timer_at = None;
                let now = self.local_now(r);
                let next = self.replicas[r].model.next_fire();
                if next.is_some_and(|t| t <= now.wall) {
                    self.trace(|| format!("r{r} timer (local {})", ms_of(now.wall)));
                    self.hear_owner(r);
                    let mut out = std::mem::take(&mut self.actions);
                    self.replicas[r].model.on_timer(now, &mut out);
                    self.perform(r, &mut out);
                    self.actions = out;
                }
                self.arm(r);
            }
            Ev::Wake { r, .. } => {
                self.replicas[r].wake_at = None;
                let now = self.local_now(r);
                self.hear_owner(r);
                let mut out = std::mem::take(&mut self.actions);
                self.replicas[r].model.on_wake(now, &mut out);
                self.perform(r, &mut out);
                self.actions = out;
                self.arm(r);
            }
            Ev::ToServer {
                r,
                inc,
                id,
                req,
                epoch,
            } => self.at_server(r, inc, id, req, epoch),
            Ev::ToClient { r, id, resp, .. } => self.at_client(r, id, resp),
            Ev::Timeout { r, id, .. } => {
                if self.replicas[r].pending.contains_key(&id) {
                    self.trace(|| format!("r{r} request {id} timed out"));
                    self.at_client(r, id, None);
                }
            }
            Ev::Step { r, run, .. } => self.step(r, run),
            Ev::Renew { r, run, .. } => self.renew(r, run),
            Ev::AskFatePoint { r, pause, .. } => {
                if !self.replicas[r].stopping {
                    self.ask_fate_point(r, pause);
                }
            }
            Ev::AskMissed {
                r, missed, attempt, ..
            } => self.ask_missed(r, missed, attempt),
            Ev::Own { r, inc } => {
                if !self.replicas[r].stopping {
                    self.ask_own(r, true);
                    self.push(self.now + OWN_EVERY, Ev::Own { r, inc });
                }
            }
            Ev::Exit { r, force, .. } => {
                if force || !self.replicas[r].model.busy() {
                    self.exit(r);
                }
            }
            Ev::CancelRuns { r, inc } => {
                let now = self.local_now(r);
                let mut out = std::mem::take(&mut self.actions);
                self.replicas[r].model.cancel_runs(now, &mut out);
                self.perform(r, &mut out);
                self.actions = out;
                self.push(
                    self.now + CANCEL_GRACE,
                    Ev::Exit {
                        r,
                        inc,
                        force: true,
                    },
                );
            }
            Ev::Fault(f) => self.fault(f),
            Ev::Control { c } => self.control(c),
            Ev::Feed {
                r, c, published, ..
            } => self.read_control(r, c, published),
            Ev::Restart { r } => self.restart(r),
            Ev::ServerUp => {}
            Ev::PauseEnd { r } => self.note_if_someone_runs(r),
            Ev::Health => self.health(),
            Ev::StalledReader {
                r,
                inc,
                stalled,
                looked,
            } => self.stalled_reader(r, inc, stalled, looked),
            Ev::Stop => {
                self.record.fate_point_at_stop = self.server.fate_point(self.now);
                // A span nobody attended until the end stays open: close it for the checker.
                if let Some(from) = self.unattended_since.take() {
                    self.record.unattended.push((from, Ms::MAX / 2));
                }
                for r in 0..self.replicas.len() {
                    if !self.replicas[r].alive {
                        self.record.down_at_stop.push(r);
                        continue;
                    }
                    let mut left: Vec<Ms> = self.replicas[r]
                        .model
                        .left_fires()
                        .into_iter()
                        .map(ms_of)
                        .collect();
                    self.replicas[r].stopping = true;
                    let now = self.local_now(r);
                    let mut out = std::mem::take(&mut self.actions);
                    self.replicas[r].model.stop(now, &mut out);
                    // The fires the stop left to the processes that go on, or to the next
                    // start's walk, recording nothing.
                    left.extend(out.iter().filter_map(|a| match a {
                        Action::Emit(Occurrence {
                            kind: EventKind::Misfired { reason, .. },
                            fire_time,
                            first_report: false,
                            manual: None,
                            ..
                        }) if reason.contains("the next start reports it") => {
                            Some(ms_of(*fire_time))
                        }
                        _ => None,
                    }));
                    self.record.left_at_stop.push((r, left));
                    self.perform(r, &mut out);
                    self.actions = out;
                    self.hand_over(r);
                }
            }
            Ev::CancelAll => {
                for r in 0..self.replicas.len() {
                    if !self.replicas[r].alive {
                        continue;
                    }
                    let mut out = std::mem::take(&mut self.actions);
                    let now = self.local_now(r);
                    self.replicas[r].model.cancel_runs(now, &mut out);
                    self.perform(r, &mut out);
                    self.actions = out;
                }
            }
        }
    }

    /// Arms the replica's timer and wake-up from its model.
    fn arm(&mut self, r: usize) {
        let rep = &self.replicas[r];
        if !rep.alive {
            return;
        }
        let to_true = |t: DateTime<Utc>| (ms_of(t) - rep.skew).max(self.now);
        let timer = rep.model.next_fire().map(to_true);
        let wake = rep.model.next_wake().map(to_true);
        let inc = rep.inc;
        if let Some(t) = timer {
            if self.replicas[r].timer_at.is_none_or(|armed| t < armed) {
                self.replicas[r].timer_at = Some(t);
                self.push(t, Ev::Timer { r, inc });
            }
        }
        if let Some(t) = wake {
            if self.replicas[r].wake_at.is_none_or(|armed| t < armed) {
                self.replicas[r].wake_at = Some(t);
                self.push(t, Ev::Wake { r, inc });
            }
        }
    }

    fn delay(&mut self) -> Ms {
        if self.rng.u32(0..1_000) < self.sc.spike_per_mille {
            RESPONSE_TIMEOUT + self.rng.i64(1..=3_000)
        } else {
            self.rng.i64(0..=self.sc.delay_max)
        }
    }

    fn send(&mut self, r: usize, req: Req, pending: Pending, timeout: Ms) -> u64 {
        let inc = self.replicas[r].inc;
        let id = self.post(r, inc, req);
        self.replicas[r].pending.insert(id, pending);
        self.push(self.now + timeout, Ev::Timeout { r, inc, id });
        id
    }

    /// Puts request `req` of incarnation `inc` of replica `r` on its way to the server, after the
    /// replica's earlier requests; answers its id.
    fn post(&mut self, r: usize, inc: u32, req: Req) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let at = (self.now + self.delay()).max(self.replicas[r].to_server_fifo);
        self.replicas[r].to_server_fifo = at;
        self.trace(|| format!("r{r} sends {id} {req:?}"));
        let epoch = self.server_epoch;
        self.push(
            at,
            Ev::ToServer {
                r,
                inc,
                id,
                req,
                epoch,
            },
        );
        id
    }

    fn at_server(&mut self, r: usize, inc: u32, id: u64, req: Req, epoch: u32) {
        if self.now < self.server_down_until || epoch != self.server_epoch {
            // Refused, or lost with the connection when the server restarted.
            // Connection refused: the client hears of it at once.
            self.reply(r, inc, id, None);
            return;
        }
        if self.now < self.server_stalled_until {
            let until = self.server_stalled_until;
            self.push(
                until,
                Ev::ToServer {
                    r,
                    inc,
                    id,
                    req,
                    epoch,
                },
            );
            return;
        }
        let had_record = self.server.has_record();
        let server_now = self.now + self.server_skew;
        let (paused, claims_before) = (self.server.paused.is_some(), self.server.claims_made());
        let resp = self.server.apply(&req, server_now);
        if let (Req::Claim { fire, .. }, Resp::Acquired { .. }) = (&req, &resp) {
            if paused && self.server.claims_made() > claims_before {
                self.record.paused_grants.push((self.now, *fire));
            }
        }
        if !had_record && self.server.has_record() {
            self.record.first_records.push(self.now);
        }
        self.trace(|| format!("server applies {id} {req:?} -> {resp:?}"));
        match (&req, &resp) {
            (Req::Claim { fire, .. }, Resp::Acquired { .. }) => {
                self.record.taken.push((self.now, *fire));
            }
            (Req::Claim { fire, .. }, Resp::Busy { .. } | Resp::Paused { .. }) => {
                self.record.decided.push((server_now, *fire, self.now));
            }
            (Req::Report { fire, .. }, Resp::Reported(Reported::First))
                if *fire > server_now + server::AHEAD_TOLERANCE =>
            {
                // Answered without a record (a clock ahead): the reporter's own word.
                self.record.unrecorded.insert((r, inc, *fire));
            }
            (Req::Report { fire, .. }, Resp::Reported(Reported::First)) if self.server.unsure => {
                // Reported missed, or claimed and forgotten: the reporter's own word.
                self.record.unrecorded.insert((r, inc, *fire));
                self.record.reports_applied.push((self.now, *fire));
            }
            (Req::Report { fire, .. }, Resp::Reported(Reported::First)) => {
                self.record.reports_applied.push((self.now, *fire));
            }
            (Req::ReportMissed { first, last, .. }, Resp::Point(before))
                if before.is_none_or(|p| p < *last) && !self.server.repeated =>
            {
                let missed = (self.now, r, inc, *before, *first, *last);
                self.record.missed_applied.push(missed);
            }
            _ => {}
        }
        if self.rng.u32(0..1_000) < self.sc.loss_per_mille {
            self.trace(|| format!("reply {id} lost"));
            return;
        }
        self.reply(r, inc, id, Some(resp));
    }

    fn reply(&mut self, r: usize, inc: u32, id: u64, resp: Option<Resp>) {
        let at = (self.now + self.delay()).max(self.replicas[r].to_client_fifo);
        self.replicas[r].to_client_fifo = at;
        self.push(at, Ev::ToClient { r, inc, id, resp });
    }

    fn at_client(&mut self, r: usize, id: u64, resp: Option<Resp>) {
        let Some(pending) = self.replicas[r].pending.remove(&id) else {
            return;
        };
        self.trace(|| format!("r{r} hears {id}: {resp:?}"));
        let now = self.local_now(r);
        let mut out = std::mem::take(&mut self.actions);
        match pending {
            Pending::Claim { fire, sent } => {
                // A claim refused as too early says nothing of an earlier one that got no answer.
                if resp.is_some() && !matches!(resp, Some(Resp::TooEarly { .. })) {
                    self.replicas[r].unanswered.remove(&fire);
                }
                let token = self.token(r, fire);
                let answer = match resp {
                    Some(Resp::Acquired { fence }) => self.acquired(r, token, fence, sent),
                    Some(Resp::AlreadyRan) => Answer::AlreadyRan,
                    Some(Resp::ClaimedByAnother) => Answer::ClaimedByAnother,
                    Some(Resp::Superseded) => Answer::Superseded,
                    Some(Resp::DroppedByAnother) => Answer::DroppedByAnother,
                    Some(Resp::Busy { first_report }) => {
                        if first_report && self.sc.overlap == Overlap::Skip {
                            let inc = self.replicas[r].inc;
                            self.record.guard_reports.push((self.now, r, inc, fire));
                        }
                        Answer::Busy { first_report }
                    }
                    Some(Resp::Lapsed) => Answer::Lapsed,
                    Some(Resp::TooEarly { ahead }) => {
                        Answer::TooEarly(Duration::from_millis(ahead.max(0) as u64))
                    }
                    Some(Resp::Paused {
                        pause: (at, by),
                        first_report,
                    }) => Answer::Paused {
                        pause: Pause::new(by, wall(at)),
                        first_report,
                    },
                    _ => Answer::Failed("no answer".to_owned()),
                };
                self.replicas[r].model.on_claimed(answer, now, &mut out);
            }
            Pending::Manual { id, sent } => {
                if resp.is_some() {
                    self.replicas[r].unanswered_manual.remove(&id);
                }
                let answer = match resp {
                    Some(Resp::Acquired { fence }) => {
                        let token = self.manual_token(r, id);
                        self.acquired(r, token, fence, sent)
                    }
                    Some(Resp::AlreadyRan) => Answer::AlreadyRan,
                    Some(Resp::Busy { first_report }) => Answer::Busy { first_report },
                    Some(Resp::Lapsed) => Answer::Lapsed,
                    Some(Resp::TooLate { late }) => {
                        Answer::TooLate(Duration::from_millis(late.max(0) as u64))
                    }
                    _ => Answer::Failed("no answer".to_owned()),
                };
                self.replicas[r].model.on_claimed(answer, now, &mut out);
            }
            Pending::Renew { run, sent } => self.renewed(r, run, sent, resp, &mut out),
            Pending::Report { fire, kind } => {
                let reported = match resp {
                    Some(Resp::Reported(reported)) => reported,
                    // When the guard cannot tell, reporting twice beats not reporting.
                    _ => Reported::First,
                };
                let inc = self.replicas[r].inc;
                let recorded = !self.record.unrecorded.contains(&(r, inc, ms_of(fire)));
                if resp == Some(Resp::Reported(Reported::First)) && recorded {
                    self.record
                        .guard_reports
                        .push((self.now, r, inc, ms_of(fire)));
                } else if reported == Reported::First {
                    self.record.own_word.insert((r, inc, ms_of(fire)));
                }
                self.replicas[r]
                    .model
                    .on_reported(fire, kind, reported, now, &mut out);
            }
            Pending::Abandon { fire, attempt } => {
                if resp.is_none() && attempt < ABANDON_ATTEMPTS {
                    self.abandon(r, fire, attempt + 1);
                }
            }
            Pending::FatePoint { pause } => match resp {
                Some(Resp::Point(point)) => {
                    self.replicas[r].point_known = true;
                    self.replicas[r]
                        .model
                        .on_fate_point(point.map(wall), now, &mut out);
                    self.note_if_someone_runs(r);
                }
                // Asked again until the store answers (as the executor), unless stopping.
                _ if !self.replicas[r].stopping => {
                    self.replicas[r].model.on_fate_point_failed(
                        "no answer".to_owned(),
                        now,
                        &mut out,
                    );
                    let inc = self.replicas[r].inc;
                    let next = (pause * 2).min(MAX_POINT_PAUSE);
                    self.push(
                        self.now + pause,
                        Ev::AskFatePoint {
                            r,
                            inc,
                            pause: next,
                        },
                    );
                }
                _ => {}
            },
            Pending::Missed { missed, attempt } => {
                let before = match resp {
                    // The server answers a retry as the try that took effect (as the Redis guard).
                    Some(Resp::Point(point)) => Some(Ok(point)),
                    // A refusal is the store's answer, not a lost reply: it is not sent again
                    // (accepted later, when the store's clock has caught up, its answer would
                    // count fires decided since as decided before).
                    Some(Resp::Refused) => Some(Err(
                        "the missed fires are not past their grace by the server's clock: this host's clock is ahead".to_owned(),
                    )),
                    _ if attempt < MISSED_TRIES => {
                        let inc = self.replicas[r].inc;
                        let at = self.now + 200 * i64::from(attempt);
                        let attempt = attempt + 1;
                        self.push(
                            at,
                            Ev::AskMissed {
                                r,
                                inc,
                                missed,
                                attempt,
                            },
                        );
                        None
                    }
                    _ => Some(Err(format!("no answer within {ASK_TIMEOUT} ms"))),
                };
                if let Some(before) = before {
                    let rep = &mut self.replicas[r];
                    if let Some(i) = rep.missed_out.iter().position(|m| *m == missed) {
                        rep.missed_out.swap_remove(i);
                    }
                    self.record.missed_heard.push(MissedHeard {
                        at: self.now,
                        replica: r,
                        incarnation: rep.inc,
                        first: ms_of(missed.first),
                        last: ms_of(missed.last),
                        before: before.clone(),
                    });
                    let before = before.map(|p| p.map(wall));
                    self.replicas[r]
                        .model
                        .on_missed_reported(missed, before, now, &mut out);
                }
            }
            Pending::Own { sent } => {
                self.replicas[r].owner_asked = self.now;
                if let Some(Resp::Owned {
                    owner,
                    members,
                    now: server_now,
                }) = resp
                {
                    let me = self.process_id(r);
                    let rep = &mut self.replicas[r];
                    // As the feed reader: a process whose clock is off the store's does not own.
                    let local_mid = (sent + self.now) / 2 + rep.skew;
                    rep.clock_off = (server_now - local_mid).abs() > OWNER_CLOCK_TOLERANCE;
                    rep.owner_view = owner
                        .as_ref()
                        .map(|(o, epoch, left, _)| (*o == me, sent + left, *epoch as Ms))
                        .filter(|(mine, _, _)| !(*mine && rep.clock_off));
                    rep.members = members;
                    rep.owner_renewed = owner.as_ref().map(|(_, _, _, alive)| *alive);
                    let seen = owner.map(|(o, epoch, _, _)| (o, epoch));
                    if seen != rep.owner_seen {
                        rep.owner_seen = seen;
                        let owner = self.owner_at(r);
                        self.trace(|| format!("r{r} hears a new owner: {owner:?}"));
                        self.replicas[r]
                            .model
                            .on_owner_changed(owner, now, &mut out);
                    }
                }
            }
            Pending::Other => {}
        }
        self.perform(r, &mut out);
        self.actions = out;
        self.arm(r);
    }

    /// This incarnation's process id at the store.
    fn process_id(&self, r: usize) -> String {
        format!("r{r}.{}", self.replicas[r].inc)
    }

    /// Who owns the partition now, as replica `r` last heard (docs/design/ownership.md).
    fn owner_at(&self, r: usize) -> Owner {
        let next = self.replicas[r].model.next_fire().map(ms_of);
        match self.replicas[r].owner_view {
            _ if self.sc.ownership.is_none() => Owner::Unknown,
            Some((true, until, _)) if self.now < until => Owner::Here,
            // As the executor: a fire that came due before the owner took the partition is not
            // left to it; another's lease holds until the store was asked after it ran out.
            Some((false, until, since))
                if self.other_lease_holds(r, until) && next.is_some_and(|t| since <= t) =>
            {
                Owner::Elsewhere
            }
            _ => Owner::Unknown,
        }
    }

    /// Tells the model who owns the partition, as the executor does before a fire or a wake-up.
    fn hear_owner(&mut self, r: usize) {
        let owner = self.owner_at(r);
        self.replicas[r].model.set_owner(owner);
        // As the executor: the owner was alive when it sent its last renewal (its own clock).
        if let (Some((false, until, _)), Some(renewed)) =
            (self.replicas[r].owner_view, self.replicas[r].owner_renewed)
        {
            if self.other_lease_holds(r, until) {
                self.replicas[r].model.owner_alive_at(wall(renewed));
            }
        }
    }

    /// Whether another process's lease, heard by replica `r` to run until `until`, still holds
    /// for it: as the executor, until the store was asked after it ran out.
    fn other_lease_holds(&self, r: usize, until: Ms) -> bool {
        self.now < until || self.replicas[r].owner_asked < until
    }

    /// Renews or asks for the partition (`want`: if the members name this replica first), or
    /// gives it up, as the feed reader does (docs/design/ownership.md).
    fn ask_own(&mut self, r: usize, want: bool) {
        if self.sc.ownership.is_none() {
            return;
        }
        let want = want && self.named_first(r);
        self.send_own(r, want, false);
    }

    /// Whether replica `r` may own the partition and its members, as it last heard them, name it
    /// first.
    fn named_first(&self, r: usize) -> bool {
        let rep = &self.replicas[r];
        !rep.clock_off
            && !rep.members.is_empty()
            && Present::new(&self.process_id(r), &rep.members).first_here("sim")
    }

    /// Sends the ownership request: `want` the partition, or `leave` the group (a shutdown).
    fn send_own(&mut self, r: usize, want: bool, leave: bool) {
        if let Some(req) = self.own_request(r, want, leave) {
            let sent = self.now;
            self.send(r, req, Pending::Own { sent }, ASK_TIMEOUT);
        }
    }

    /// The ownership request of replica `r` now; `None` with ownership off.
    fn own_request(&self, r: usize, want: bool, leave: bool) -> Option<Req> {
        Some(Req::Own {
            me: self.process_id(r),
            want: want && !leave,
            leave,
            lease: self.sc.ownership?,
            ttl: MEMBER_TTL,
            alive: self.now + self.replicas[r].skew,
        })
    }

    /// A step of the feed reader of a replica whose shard stalled for good: as the feed reader
    /// does (`Pulses::stalled`), it renews or asks for the partition while the stall is not yet
    /// seen — a second late, at two looks — and then leaves the group for good (also at the
    /// run's end, as a stopping reader hands over). Its view of the members and the owner stays
    /// as the shard left it, and no answer reaches the job.
    fn stalled_reader(&mut self, r: usize, inc: u32, stalled: Ms, looked: Ms) {
        let rep = &self.replicas[r];
        if rep.inc != inc || rep.alive {
            return; // the process was restarted
        }
        if rep.paused_until > self.now {
            let until = rep.paused_until;
            self.push(
                until,
                Ev::StalledReader {
                    r,
                    inc,
                    stalled,
                    looked,
                },
            );
            return;
        }
        let limit = Ms::try_from(crate::executor::STALL_LIMIT.as_millis()).unwrap_or(Ms::MAX);
        let seen = stalled <= looked && stalled + limit <= self.now;
        let leave = seen || self.now >= RUN_FOR;
        let Some(req) = self.own_request(r, self.named_first(r), leave) else {
            return;
        };
        self.post(r, inc, req);
        if !leave {
            self.push(
                self.now + OWN_EVERY,
                Ev::StalledReader {
                    r,
                    inc,
                    stalled,
                    looked: self.now,
                },
            );
        }
    }

    /// A stopping scheduler leaves: no member from now on, its partition given up at once (a
    /// frozen one cannot).
    fn hand_over(&mut self, r: usize) {
        if self.replicas[r].paused_until <= self.now {
            self.send_own(r, false, true);
        }
    }

    /// Reads the fate point of the job (docs/guide/downtime.md).
    fn ask_fate_point(&mut self, r: usize, pause: Ms) {
        self.send(r, Req::FatePoint, Pending::FatePoint { pause }, ASK_TIMEOUT);
    }

    /// Sends try `attempt` of a report of missed fires.
    fn ask_missed(&mut self, r: usize, missed: MissedFires, attempt: u32) {
        let req = Req::ReportMissed {
            first: ms_of(missed.first),
            last: ms_of(missed.last),
            grace: self.sc.grace,
            nonce: self.replicas[r].nonce,
        };
        self.send(r, req, Pending::Missed { missed, attempt }, ASK_TIMEOUT);
    }

    /// Gives up a claim, asking again (as the executor does) when the guard does not answer.
    fn abandon(&mut self, r: usize, fire: Ms, attempt: u32) {
        let req = Req::Abandon {
            fire,
            token: self.token(r, fire),
        };
        self.send(r, req, Pending::Abandon { fire, attempt }, RESPONSE_TIMEOUT);
    }

    /// A granted claim, sent at `sent`: its lease waits for the model's word.
    fn acquired(&mut self, r: usize, token: String, fence: u64, sent: Ms) -> Answer {
        self.replicas[r].pending_lease = Some(Lease { token, fence, sent });
        Answer::Acquired {
            token: fence,
            deadline: Some(Duration::from_millis((sent + self.sc.lease).max(0) as u64)),
        }
    }

    fn token(&self, r: usize, fire: Ms) -> String {
        format!("{:x}:{fire}", self.replicas[r].nonce)
    }

    /// The token of every claim of manual run `id` by this incarnation (as the Redis guard).
    fn manual_token(&self, r: usize, id: u64) -> String {
        format!("{:x}:manual:{id:016x}", self.replicas[r].nonce)
    }

    /// Carries out a replica's actions as the executor does.
    fn perform(&mut self, r: usize, out: &mut Vec<Action>) {
        let mut i = 0;
        while i < out.len() {
            let action = std::mem::replace(&mut out[i], Action::Cancel(RunId::MAX));
            i += 1;
            self.perform_one(r, action);
        }
        out.clear();
    }

    fn perform_one(&mut self, r: usize, action: Action) {
        let inc = self.replicas[r].inc;
        match action {
            Action::Claim(fire) => {
                if let Some(id) = fire.manual() {
                    self.claim_manual(r, id, ms_of(fire.t));
                    return;
                }
                let fire = ms_of(fire.t);
                let req = Req::Claim {
                    fire,
                    token: self.token(r, fire),
                    lease: self.sc.lease,
                    skip: self.sc.overlap == Overlap::Skip,
                    replace: self.sc.overlap == Overlap::Replace,
                    nonce: self.replicas[r].nonce,
                };
                let sent = self.now;
                self.record.claims.push((sent, fire, r));
                self.replicas[r].unanswered.insert(fire);
                self.send(r, req, Pending::Claim { fire, sent }, RESPONSE_TIMEOUT);
            }
            Action::Abandon(fire) => {
                let lease = self.replicas[r].pending_lease.take();
                if fire.manual().is_some() {
                    // Only the lease goes back (as the executor): an unseen manual claim frees
                    // itself when its lease runs out.
                    if let Some(lease) = lease {
                        let req = Req::Release { token: lease.token };
                        self.send(r, req, Pending::Other, RESPONSE_TIMEOUT);
                    }
                    return;
                }
                let fire = ms_of(fire.t);
                self.abandon(r, fire, 1);
            }
            Action::Start {
                run,
                fire,
                token,
                manual,
            } => {
                let Some(lease) = self.replicas[r].pending_lease.take() else {
                    panic!("r{r}: a run started without a lease");
                };
                assert_eq!(lease.fence, token, "the run's token is its lease's");
                let key = RunKey {
                    replica: r,
                    incarnation: inc,
                    run,
                };
                let fire = ms_of(fire);
                self.trace(|| format!("r{r} STARTS fire {fire} manual {manual:?} token {token}"));
                self.record.starts.push(Start {
                    at: self.now,
                    key,
                    fire,
                    token,
                    claimed: lease.sent,
                    local: ms_of(self.local_now(r).wall),
                    manual,
                });
                let deadline = lease.sent + self.sc.lease;
                let renew_at = lease.sent + self.sc.lease / 3;
                self.replicas[r].runs.push(SimRun {
                    id: run,
                    lease,
                    deadline,
                    steps_left: self.sc.steps,
                    cancelled: false,
                    cancel_told: false,
                    started: self.now,
                });
                // The first poll happens at once.
                self.step(r, run);
                if self.replicas[r].runs.iter().any(|x| x.id == run) {
                    self.push(renew_at, Ev::Renew { r, inc, run });
                }
            }
            // The simulated jobs have no retries; a held lease stays pending until its start.
            Action::Retry { .. } | Action::Finish(_) | Action::Hold => {}
            Action::Cancel(run) => {
                if let Some(x) = self.replicas[r].runs.iter_mut().find(|x| x.id == run) {
                    x.cancelled = true;
                    self.push(self.now, Ev::Step { r, inc, run });
                }
            }
            Action::ReportMissed(missed) => {
                self.replicas[r].missed_out.push(missed);
                self.ask_missed(r, missed, 1);
            }
            Action::AskReport { fire, kind } => {
                let req = Req::Report {
                    fire: ms_of(fire),
                    nonce: self.replicas[r].nonce,
                };
                self.send(r, req, Pending::Report { fire, kind }, REPORT_TIMEOUT);
            }
            Action::Emit(event) => {
                self.trace(|| {
                    format!(
                        "r{r} emits {} fire {} manual {:?} first {}",
                        event.kind.name(),
                        ms_of(event.fire_time),
                        event.manual,
                        event.first_report
                    )
                });
                self.record.events.push((self.now, r, inc, event));
            }
        }
    }

    /// Claims manual run `id`, asked for at `requested` (as the replica's model saw it).
    fn claim_manual(&mut self, r: usize, id: u64, requested: Ms) {
        let req = Req::Manual {
            id,
            token: self.manual_token(r, id),
            lease: self.sc.lease,
            requested,
            grace: self.sc.grace,
        };
        let sent = self.now;
        self.replicas[r].unanswered_manual.insert(id);
        self.send(r, req, Pending::Manual { id, sent }, RESPONSE_TIMEOUT);
    }

    /// One poll of a run's body: never past the lease's local deadline.
    fn step(&mut self, r: usize, id: RunId) {
        let inc = self.replicas[r].inc;
        let Some(pos) = self.replicas[r].runs.iter().position(|x| x.id == id) else {
            return;
        };
        let run = &mut self.replicas[r].runs[pos];
        let end = if run.cancelled {
            Some(RunEnd::Cancelled)
        } else if self.now >= run.deadline {
            Some(RunEnd::LeaseExpired)
        } else {
            run.steps_left = run.steps_left.saturating_sub(1);
            let done = run.steps_left == 0;
            let key = RunKey {
                replica: r,
                incarnation: inc,
                run: id,
            };
            self.record.steps.push((self.now, key));
            if done {
                Some(RunEnd::Ok)
            } else {
                let next = self.now + (self.sc.work / i64::from(self.sc.steps)).max(1);
                self.push(next, Ev::Step { r, inc, run: id });
                None
            }
        };
        if let Some(end) = end {
            let run = self.replicas[r].runs.remove(pos);
            self.trace(|| format!("r{r} run {id} ends {end:?}"));
            let release = Req::Release {
                token: run.lease.token.clone(),
            };
            // As the executor: the lease goes back before the model hears that the run ended,
            // so the claim of the next fire never overtakes it.
            self.send(r, release, Pending::Other, RESPONSE_TIMEOUT);
            let duration = Duration::from_millis((self.now - run.started).max(0) as u64);
            let now = self.local_now(r);
            let mut out = std::mem::take(&mut self.actions);
            self.replicas[r]
                .model
                .on_run_ended(id, end, duration, now, &mut out);
            self.perform(r, &mut out);
            self.actions = out;
            self.arm(r);
        }
    }

    /// The watchdog's turn for run `id`.
    fn renew(&mut self, r: usize, id: RunId) {
        let Some(run) = self.replicas[r].runs.iter().find(|x| x.id == id) else {
            return;
        };
        if self.now >= run.deadline {
            self.lost(r, id, "no renewal within the lease");
            return;
        }
        let (req, timeout) = (
            Req::Renew {
                token: run.lease.token.clone(),
                lease: self.sc.lease,
            },
            run.deadline - self.now,
        );
        let sent = self.now;
        self.send(r, req, Pending::Renew { run: id, sent }, timeout);
    }

    fn renewed(
        &mut self,
        r: usize,
        id: RunId,
        sent: Ms,
        resp: Option<Resp>,
        out: &mut Vec<Action>,
    ) {
        let inc = self.replicas[r].inc;
        let lease = self.sc.lease;
        let now = self.local_now(r);
        let Some(run) = self.replicas[r].runs.iter_mut().find(|x| x.id == id) else {
            return;
        };
        match resp {
            Some(Resp::Renewed | Resp::CancelRequested) => {
                run.deadline = sent + lease;
                let tell = resp == Some(Resp::CancelRequested) && !run.cancel_told;
                run.cancel_told |= tell;
                self.push(sent + lease / 3, Ev::Renew { r, inc, run: id });
                if tell {
                    self.replicas[r]
                        .model
                        .on_verdict(id, Verdict::CancelRequested, now, out);
                }
            }
            Some(Resp::Lost) => {
                self.replicas[r].model.on_verdict(
                    id,
                    Verdict::Lost("the lock is gone".to_owned()),
                    now,
                    out,
                );
            }
            _ => {
                if self.now >= run.deadline {
                    self.replicas[r].model.on_verdict(
                        id,
                        Verdict::Lost("no renewal within the lease".to_owned()),
                        now,
                        out,
                    );
                } else {
                    let retry = self.now + (lease / 12).max(10);
                    self.push(retry, Ev::Renew { r, inc, run: id });
                }
            }
        }
    }

    fn lost(&mut self, r: usize, id: RunId, why: &str) {
        let now = self.local_now(r);
        let mut out = std::mem::take(&mut self.actions);
        self.replicas[r]
            .model
            .on_verdict(id, Verdict::Lost(why.to_owned()), now, &mut out);
        self.perform(r, &mut out);
        self.actions = out;
        self.arm(r);
    }

    fn fault(&mut self, fault: Fault) {
        self.trace(|| format!("FAULT {fault:?}"));
        match fault {
            Fault::Pause { replica, length } => {
                let rep = &mut self.replicas[replica];
                rep.paused_until = rep.paused_until.max(self.now + length);
                let until = rep.paused_until;
                self.record.pauses.push((replica, self.now, until));
                self.note_if_nobody_runs();
                self.push(until, Ev::PauseEnd { r: replica });
            }
            Fault::Stall { replica, phase } => {
                let rep = &self.replicas[replica];
                if !rep.alive || rep.draining || rep.stopping || rep.paused_until > self.now {
                    return;
                }
                let (inc, stalled) = (rep.inc, self.now);
                // The fires waiting in the stalled shard stay there: the other processes decide
                // them, unless none can (docs/design/guarantees.md).
                let held = rep
                    .model
                    .due_fires()
                    .into_iter()
                    .map(|t| (replica, ms_of(t)));
                self.record.stalled_open.extend(held);
                self.go_down(replica);
                let first = self.now + phase;
                self.push(
                    first,
                    Ev::StalledReader {
                        r: replica,
                        inc,
                        stalled,
                        looked: first - OWN_EVERY,
                    },
                );
            }
            Fault::Crash { replica, down } => {
                if !self.replicas[replica].alive {
                    return;
                }
                self.go_down(replica);
                self.push(self.now + down, Ev::Restart { r: replica });
            }
            Fault::AllDown {
                down,
                graceful,
                restarts,
            } => {
                for (r, back) in restarts.into_iter().enumerate().take(self.replicas.len()) {
                    let restart_at = self.now + down + back;
                    self.replicas[r].down_until = restart_at;
                    self.push(restart_at, Ev::Restart { r });
                    let rep = &self.replicas[r];
                    if !rep.alive || rep.draining {
                        continue;
                    }
                    if !graceful {
                        self.go_down(r);
                        continue;
                    }
                    self.stop_gracefully(r);
                }
            }
            Fault::ClockStep { replica, by } => {
                self.replicas[replica].skew += by;
                let inc = self.replicas[replica].inc;
                self.replicas[replica].timer_at = None;
                self.replicas[replica].wake_at = None;
                // The executor's timers were armed on the old clock; they fire and re-check.
                self.push(self.now, Ev::Timer { r: replica, inc });
                self.push(self.now, Ev::Wake { r: replica, inc });
                // A clock now far off runs the job no more as the store sees it, or again.
                self.note_if_nobody_runs();
                self.note_if_someone_runs(replica);
            }
            Fault::ServerClockStep { by } => {
                self.server_skew += by;
                self.record.server_steps.push((self.now, by));
                self.note_if_nobody_runs();
                for r in 0..self.replicas.len() {
                    self.note_if_someone_runs(r);
                }
            }
            Fault::Stop { replica, down } => {
                let rep = &self.replicas[replica];
                if !rep.alive || rep.draining || rep.down_until > self.now {
                    return;
                }
                let restart_at = self.now + down;
                self.replicas[replica].down_until = restart_at;
                self.push(restart_at, Ev::Restart { r: replica });
                self.stop_gracefully(replica);
            }
            Fault::ServerStall { length } => {
                self.server_stalled_until = self.server_stalled_until.max(self.now + length);
                self.record.outages.push((self.now, self.now + length));
            }
            Fault::ServerRestart { down, lose_data } => {
                self.server_down_until = self.now + down;
                self.server_epoch += 1;
                self.record.outages.push((self.now, self.now + down));
                if lose_data {
                    self.resume_at_server();
                    self.server = JobState::default();
                    self.record.data_losses.push(self.now);
                }
                self.push(self.now + down, Ev::ServerUp);
            }
        }
    }

    /// As at the end of the run: the scheduler stops, runs go on until the shutdown deadline,
    /// and the process exits once nothing is going on.
    fn stop_gracefully(&mut self, r: usize) {
        let inc = self.replicas[r].inc;
        self.replicas[r].draining = true;
        self.replicas[r].stopping = true;
        let now = self.local_now(r);
        let mut out = std::mem::take(&mut self.actions);
        self.replicas[r].model.stop(now, &mut out);
        self.perform(r, &mut out);
        self.actions = out;
        self.hand_over(r);
        self.note_if_nobody_runs();
        self.push(self.now + SHUTDOWN_TIMEOUT, Ev::CancelRuns { r, inc });
        self.push(
            self.now,
            Ev::Exit {
                r,
                inc,
                force: false,
            },
        );
    }

    /// The replica's process is gone (it crashed, or exited after a stop): whatever it had in
    /// flight is lost with it.
    fn go_down(&mut self, r: usize) {
        let rep = &mut self.replicas[r];
        rep.alive = false;
        rep.draining = false;
        self.record
            .crash_lost
            .extend(rep.unanswered.iter().copied());
        self.record
            .manual_crash_lost
            .extend(rep.unanswered_manual.iter().copied());
        self.record.ends.push((self.now, r, rep.inc));
        // Fires left to a partition's owner and not walked yet die with the process that left
        // them: if the owner went too, nobody else knows of them (docs/design/guarantees.md).
        self.record
            .crash_lost
            .extend(rep.model.left_fires().into_iter().map(ms_of));
        // A fire claimed ahead dies with its claimant before its instant (docs/design/standby.md):
        // nobody else runs or reports it.
        self.record
            .crash_lost
            .extend(rep.model.held_fire().map(ms_of));
        for p in rep.pending.values() {
            match p {
                Pending::Claim { fire, .. } => self.record.crash_lost.push(*fire),
                Pending::Report { fire, .. } => self.record.crash_lost.push(ms_of(*fire)),
                Pending::Manual { id, .. } => self.record.manual_crash_lost.push(*id),
                _ => {}
            }
        }
        self.trace(|| format!("r{r} goes down"));
        self.note_if_nobody_runs();
    }

    /// A replica stopped for a downtime exits.
    fn exit(&mut self, r: usize) {
        if !self.replicas[r].alive {
            return;
        }
        self.go_down(r);
        if std::mem::take(&mut self.replicas[r].restart_after_exit) {
            self.restart(r);
        }
    }

    /// Starts a gap when no replica runs the job any more, and an unattended span when none
    /// that is not frozen does.
    fn note_if_nobody_runs(&mut self) {
        let n = self.replicas.len();
        if self.all_down_since.is_none() && !(0..n).any(|i| self.honest(i, false)) {
            self.all_down_since = Some(self.now);
        }
        let attended = |i: usize| self.honest(i, true) && self.replicas[i].point_known;
        if self.unattended_since.is_none() && !(0..n).any(attended) {
            self.unattended_since = Some(self.now);
        }
    }

    /// Ends a gap, or an unattended span, when replica `r` runs the job (again).
    fn note_if_someone_runs(&mut self, r: usize) {
        if self.honest(r, false) {
            if let Some(from) = self.all_down_since.take() {
                self.record.all_down.push((from, self.now));
            }
        }
        if self.honest(r, true) && self.replicas[r].point_known {
            if let Some(from) = self.unattended_since.take() {
                self.record.unattended.push((from, self.now));
            }
        }
    }

    /// Whether replica `r` runs the job as the store sees it: it is up, not frozen and not
    /// stopping, and its clock is neither
    /// ahead of the server's by more than a claim may be nor behind by the grace (a replica
    /// hours off claims no fire of now, and records nothing for it).
    fn honest(&self, r: usize, awake: bool) -> bool {
        let rep = &self.replicas[r];
        rep.alive
            && !rep.stopping
            && (!awake || rep.paused_until <= self.now)
            && rep.skew - self.server_skew <= server::AHEAD_TOLERANCE
            && rep.skew - self.server_skew > -self.sc.grace
    }

    /// A replica process starts (at the beginning, or after a crash) with a fresh model.
    fn restart(&mut self, r: usize) {
        let rep = &mut self.replicas[r];
        if self.now < rep.down_until || self.now >= RUN_FOR {
            // Down for a downtime that ends later, or the service was shut down.
            return;
        }
        if rep.alive {
            // Still draining after a stop: it starts again once it exited.
            rep.restart_after_exit |= rep.draining;
            return;
        }
        let spec = self.sc.spec();
        let seed = self.rng.u64(..);
        let nonce = self.rng.u64(..);
        let rep = &mut self.replicas[r];
        rep.inc += 1;
        rep.alive = true;
        rep.nonce = nonce;
        rep.model = JobModel::new(spec);
        rep.seed = seed;
        rep.pending.clear();
        rep.unanswered.clear();
        rep.unanswered_manual.clear();
        rep.pending_lease = None;
        rep.runs.clear();
        rep.timer_at = None;
        rep.wake_at = None;
        rep.paused_until = 0;
        rep.stopping = false;
        rep.missed_out.clear();
        rep.restart_after_exit = false;
        rep.owner_view = None;
        rep.members.clear();
        rep.clock_off = false;
        rep.owner_seen = None;
        rep.owner_renewed = None;
        rep.owner_asked = 0;
        let inc = rep.inc;
        if self.sc.ownership.is_some() {
            self.push(self.now, Ev::Own { r, inc });
        }
        let wall_now = self.local_now(r).wall;
        self.replicas[r].model.schedule_from(wall_now);
        // The executor reads the store's fate point to catch up on the fires before the start.
        let catches_up = self.replicas[r].model.await_fate_point(wall_now);
        self.replicas[r].point_known = !catches_up;
        self.note_if_someone_runs(r);
        if catches_up {
            self.ask_fate_point(r, FIRST_POINT_PAUSE);
        }
        if let Some(named) = self.sc.named {
            // The named replica's start is heard by every replica (it attends the store).
            self.named_known |= named == r;
            if self.named_known {
                for (i, rep) in self.replicas.iter_mut().enumerate() {
                    rep.model.set_first_here(Some(i == named));
                }
            }
        }
        self.trace(|| format!("r{r} starts"));
        self.arm(r);
    }

    /// An operator makes a control, as the CLI does: a pause or resume is written to the store
    /// (retried until the store answers), and the control published on the feed; each replica
    /// process that is up reads it after its delay. A process started later reads the feed
    /// from its end at its first read, as the feed readers do (`operate.rs`): it never reads it.
    fn control(&mut self, c: usize) {
        let unavailable = self.server_down_until.max(self.server_stalled_until);
        if self.now < unavailable {
            self.push(unavailable, Ev::Control { c });
            return;
        }
        let (_, control, delays) = self.sc.controls[c];
        self.trace(|| format!("CONTROL {control:?}"));
        match control {
            Control::Pause => {
                if self.server.paused.is_none() {
                    self.server.paused = Some((self.now + self.server_skew, "ops".to_owned()));
                    self.record.paused.push((self.now, Ms::MAX / 2));
                }
            }
            Control::Resume => {
                self.resume_at_server();
            }
            Control::RunNow { id } => self.record.requests.push((self.now, id)),
        }
        for (r, delay) in delays.into_iter().enumerate().take(self.replicas.len()) {
            let rep = &self.replicas[r];
            if !rep.alive {
                continue;
            }
            let inc = rep.inc;
            let at = (self.now + delay).max(self.feed_fifo[r]);
            self.feed_fifo[r] = at;
            let published = self.now;
            self.push(
                at,
                Ev::Feed {
                    r,
                    inc,
                    c,
                    published,
                },
            );
        }
    }

    /// The server's pause ends (resumed, or its data lost).
    fn resume_at_server(&mut self) {
        if self.server.paused.take().is_some() {
            if let Some(span) = self.record.paused.last_mut() {
                span.1 = self.now;
            }
        }
    }

    /// Replica `r`'s feed reader reads control `c`: while the store does not answer it reads
    /// nothing, and a control the store lost with its data is never read.
    fn read_control(&mut self, r: usize, c: usize, published: Ms) {
        let unavailable = self.server_down_until.max(self.server_stalled_until);
        if self.now < unavailable {
            let inc = self.replicas[r].inc;
            self.push(
                unavailable,
                Ev::Feed {
                    r,
                    inc,
                    c,
                    published,
                },
            );
            return;
        }
        if self
            .record
            .data_losses
            .iter()
            .any(|l| published < *l && *l <= self.now)
        {
            return;
        }
        let control = self.sc.controls[c].1;
        self.trace(|| format!("r{r} reads {control:?} from the feed"));
        let now = self.local_now(r);
        let mut out = std::mem::take(&mut self.actions);
        match control {
            Control::RunNow { id } => {
                if !self.replicas[r].stopping {
                    let inc = self.replicas[r].inc;
                    self.record.triggered.push((self.now, r, inc, id));
                }
                let run = ManualRun {
                    id,
                    requested_at: wall(published),
                };
                self.replicas[r].model.on_trigger(run, now, &mut out);
            }
            Control::Pause => {
                let pause = Pause::new("ops", wall(published));
                self.replicas[r]
                    .model
                    .set_paused(Some(pause), now, &mut out);
            }
            Control::Resume => self.replicas[r].model.set_paused(None, now, &mut out),
        }
        self.perform(r, &mut out);
        self.actions = out;
        self.arm(r);
    }

    fn health(&mut self) {
        let last = self.server.last_claimed().map(wall);
        for r in 0..self.replicas.len() {
            let rep = &self.replicas[r];
            if !rep.alive || rep.paused_until > self.now || rep.stopping {
                continue;
            }
            let now = self.local_now(r).wall;
            let grace = Duration::from_millis(self.sc.grace as u64);
            let due = rep.model.due_by(now);
            let known = if let Some(p) = rep.model.paused() {
                // As the monitor: a job paused as far as this process knows is not judged.
                HealthState::Paused {
                    by: p.by.clone(),
                    at: p.at,
                }
            } else if self.now < self.server_down_until || self.now < self.server_stalled_until {
                HealthState::Unknown {
                    reason: "no answer".to_owned(),
                }
            } else {
                judge(due, last, grace, now)
            };
            let record = HealthRecord {
                at: self.now,
                replica: r,
                local: ms_of(now),
                due: due.map(ms_of),
                state: known,
                point_known: rep.point_known,
            };
            self.record.health.push(record);
        }
    }
}

/// Runs `seed`; `Err` holds the violated invariants and the trace.
pub(super) fn run_seed(seed: u64, tracing: bool) -> Result<(), String> {
    let mut sim = Sim::new(seed, tracing);
    sim.run();
    check::check(sim.scenario(), &sim.record)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeds() -> std::ops::Range<u64> {
        let n = std::env::var("CRONGUARD_SIM_SEEDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(4_000);
        let first = std::env::var("CRONGUARD_SIM_FIRST_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        first..first + n
    }

    /// Replays one seed with its trace: `CRONGUARD_SIM_SEED=42 cargo test -p cronguard sim`.
    fn replay(seed: u64) -> String {
        let mut sim = Sim::new(seed, true);
        sim.run();
        replay_of(seed, sim)
    }

    fn replay_of(seed: u64, sim: Sim) -> String {
        let verdict = check::check(sim.scenario(), &sim.record);
        format!(
            "seed {seed}: {:?}\n{:#?}\n{}",
            verdict,
            sim.scenario(),
            sim.record.trace.join("\n")
        )
    }

    #[test]
    fn the_invariants_hold_over_many_seeds() {
        if let Some(seed) = std::env::var("CRONGUARD_SIM_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            let report = replay(seed);
            println!("{report}");
            assert!(run_seed(seed, false).is_ok(), "{report}");
            return;
        }
        let range = seeds();
        let count = range.end - range.start;
        // Seeds are independent: spread them over the cores.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        let mut failures: Vec<(u64, String)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|k| {
                    let range = range.clone();
                    scope.spawn(move || {
                        range
                            .filter(|seed| seed % threads == k)
                            .filter_map(|seed| run_seed(seed, false).err().map(|e| (seed, e)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        failures.sort_by_key(|(seed, _)| *seed);
        let mut kinds = std::collections::BTreeMap::new();
        for (_, e) in &failures {
            for line in e.lines() {
                *kinds
                    .entry(line.split(':').next().unwrap_or("?").to_owned())
                    .or_insert(0) += 1;
            }
        }
        if let Ok(path) = std::env::var("CRONGUARD_SIM_DUMP") {
            let text: Vec<String> = failures
                .iter()
                .map(|(seed, e)| format!("{seed}\t{}", e.replace('\n', " | ")))
                .collect();
            let _ = std::fs::write(path, text.join("\n"));
        }
        if let Some((seed, e)) = failures.first() {
            println!("broken invariants (lines per invariant): {kinds:?}");
            let seeds: Vec<u64> = failures.iter().map(|(s, _)| *s).collect();
            panic!(
                "{} of {count} seeds broke an invariant: {seeds:?}\nfirst: seed {seed}: {e}\nreplay it with CRONGUARD_SIM_SEED={seed} cargo test -p cronguard --lib sim -- --nocapture",
                failures.len()
            );
        }
        println!("simulation: {count} seeds, every invariant held");
    }

    /// Seeds the long soaks found breaking an invariant, kept as they were fixed. A change of the
    /// simulation's draws gives them other scenarios; they stay cheap extra seeds then.
    #[test]
    fn the_seeds_the_soaks_found_keep_every_invariant() {
        let found = [
            // A restart's walk waiting for the fate point while a walk of fires left recorded
            // its range first.
            415_353,
            // A host whose clock is ahead recorded missed fires whose grace had not passed by
            // the store's clock: the fate point moved past fires a crashed owner had left.
            807_440, 821_648,
            // A report of missed fires recorded, its answer lost with the store's data.
            806_901, // A stop recorded missed fires past a fire it left open.
            807_366, 101_992,
            // A refused report sent again until the store's clock caught up.
            209_512, 104_557, 813_361,
            // Drops held for a report of later missed fires taken as recorded by it.
            203_556,
            // Fires slept through that a claim passed over, taken as decided by the point.
            520_665, 522_387, 604_270,
            // A later report sent while an earlier one, and a drop between, waited.
            719_550,
            // A fire held back for a report, left at the final stop while frozen.
            905_485, 509_312,
        ];
        for seed in found {
            if let Err(e) = run_seed(seed, false) {
                panic!("seed {seed}: {e}\n{}", replay(seed));
            }
        }
    }

    /// A cluster without faults, its clocks close: once every replica has seen a fire's
    /// outcome, one replica claims each fire at its instant and the others only after the
    /// standby (docs/design/standby.md), so the guard answers one claim per fire at the instant
    /// instead of one per replica.
    #[test]
    fn a_quiet_cluster_claims_each_fire_once_at_its_instant() {
        for seed in 0..100 {
            let mut sc = Scenario::draw(seed);
            sc.faults.clear();
            // A pause makes every replica claim at the instant (nobody stands by).
            sc.controls.clear();
            sc.loss_per_mille = 0;
            sc.spike_per_mille = 0;
            sc.delay_max = sc.delay_max.min(20);
            for skew in &mut sc.skew {
                *skew = (*skew).clamp(-20, 20);
            }
            sc.work = sc.period / 4;
            sc.standby = 1_000;
            let mut sim = Sim::with(seed, sc, false);
            sim.run();
            let claims = if sim.scenario().ownership.is_some() {
                check::only_the_owner_claims
            } else {
                check::one_claim_at_each_instant
            };
            let verdict = check::check(sim.scenario(), &sim.record)
                .and_then(|()| claims(sim.scenario(), &sim.record));
            if let Err(e) = verdict {
                panic!("{e}\n{}", replay_of(seed, sim));
            }
        }
    }
}
