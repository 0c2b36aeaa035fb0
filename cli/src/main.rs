//! `cronguard`: lists, pauses, resumes, runs now and reads the history of the jobs of a shared
//! guard's store (a lock dir, Redis, PostgreSQL) without running them, and checks from outside
//! the replicas that they still run (`health`), through `cronguard::admin`, the code the replicas
//! use (docs/operations/cli.md).
//!
//! It reads the store's settings from the same environment variables as the replicas (see
//! [`AFTER_HELP`]), never needs a password on its command line, and prints every text that comes
//! from the store with its control characters escaped. Exit statuses: [`exit`].

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};
use cronguard::admin::{
    AdminError, RedisTlsFiles, Store, StoreHealth, StoreProcess, StoredJob, StoredJobState,
};
use cronguard::history::HistoryEntry;

/// The exit statuses, as `--help` and docs/operations/cli.md document them.
mod exit {
    /// Done; `health`: every job is on time or paused.
    pub const OK: u8 = 0;
    /// `health`: a job is missed or overdue. Any command: a failure none of the others names
    /// (the output could not be written).
    pub const UNHEALTHY: u8 = 1;
    /// The command line or the settings are wrong.
    pub const USAGE: u8 = 2;
    /// The store could not be used, or failed the request; `health`: a job's state could not be
    /// read.
    pub const STORE: u8 = 3;
    /// What the store holds rules the request out: an unknown job, no live replica of it, no
    /// history or no controls in its guard; `health`: no job to check.
    pub const REFUSED: u8 = 4;
}

/// What `cronguard --help` says after the options: the environment, and the exit statuses.
const AFTER_HELP: &str = "\
Store: one per call. A store flag names it (--redis, --redis-url-file, --postgres,
--postgres-url-file, --lock-dir); else --store picks the kind and the environment gives its
settings; else the environment names it: the one kind whose CRONGUARD_ variables are set (the
URL, its _FILE twin, or the lock dir), else the one of REDIS_URL and DATABASE_URL that is set.
When the environment names several, pick one with --store.

Every setting comes from the first of: its flag, its CRONGUARD_ variable, that variable's _FILE
twin (a file that holds the URL, as Docker and Kubernetes secrets are mounted; the whitespace
around it is trimmed), the generic variable, the default. A URL and its _FILE twin given
together (both flags, or both variables) is an error. The replicas read the same variables.

Environment:
  CRONGUARD_REDIS_URL, CRONGUARD_REDIS_URL_FILE, REDIS_URL
        the Redis of `lock = \"redis\"` jobs (--redis, --redis-url-file)
  CRONGUARD_REDIS_PREFIX
        the Redis key prefix (--prefix) [default: cronguard]
  CRONGUARD_REDIS_CA_FILE
        for rediss://: a PEM file of the CA(s) to trust instead of the system's (--redis-ca-file)
  CRONGUARD_REDIS_CLIENT_CERT_FILE, CRONGUARD_REDIS_CLIENT_KEY_FILE
        for rediss://: a client certificate and its key, PEM (--redis-client-cert-file,
        --redis-client-key-file)
  CRONGUARD_POSTGRES_URL, CRONGUARD_POSTGRES_URL_FILE, DATABASE_URL
        the PostgreSQL of `lock = \"postgres\"` jobs (--postgres, --postgres-url-file)
  CRONGUARD_POSTGRES_CA_FILE
        for a PostgreSQL URL with TLS (sslmode): a PEM file of the CA(s) to trust instead of the
        system's (or sslrootcert in the URL)
  CRONGUARD_POSTGRES_CLIENT_CERT_FILE, CRONGUARD_POSTGRES_CLIENT_KEY_FILE
        for a PostgreSQL server that asks for client certificates: the certificate and its key,
        PEM (or sslcert and sslkey in the URL)
  CRONGUARD_POSTGRES_POOL_SIZE
        connections to PostgreSQL [default: 8]
  CRONGUARD_POSTGRES_SCHEMA
        the PostgreSQL schema (--schema) [default: cronguard]
  CRONGUARD_LOCK_DIR
        the lock dir of `lock = \"file\"` jobs (--lock-dir)
  USER, LOGNAME
        who pauses or resumes (--by) [default: $USER@hostname]
  CRONGUARD_DASHBOARD_TOKEN, CRONGUARD_DASHBOARD_TOKEN_FILE
        `dashboard`: the operator's token (read the pages, pause, resume, run now), or a file
        that holds it
  CRONGUARD_DASHBOARD_READ_TOKEN, CRONGUARD_DASHBOARD_READ_TOKEN_FILE
        `dashboard`: a read-only token, or a file that holds it

A password in a URL given with --redis or --postgres can be read by every user of the host in
the process list: give the URL in a file (--redis-url-file, CRONGUARD_REDIS_URL_FILE) or in
CRONGUARD_REDIS_URL instead (the tool warns on stderr when it finds one).

Texts from the store (job names, schedules, instances, operators, reasons, errors) are printed
with their control characters escaped (\\u{1b}, \\n); --json escapes them as JSON does.

Exit status:
  0  done (health: every job is on time or paused)
  1  health: a job is missed or overdue; any command: a failure none of the others names
  2  the command line or the settings are wrong: an unknown flag, no store or several, a URL
     file that cannot be read, a --since that is neither a time nor a duration, a dashboard
     on a non-loopback address without a token
  3  the store could not be used: it cannot be reached or did not answer, it refused the URL,
     the credentials or the TLS files, or it failed the request (health: a job's state could
     not be read)
  4  refused by what the store holds: no replica announced the job, no live replica runs it
     (trigger without --force), its guard keeps no history or has no pause and run now
     (health: no job to check)";

/// Operate the jobs of a cronguard store: the replicas see every change within about a second.
#[derive(Debug, Parser)]
#[command(name = "cronguard", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(flatten)]
    store: StoreArgs,
    #[command(subcommand)]
    command: Command,
}

/// Where the jobs' guard keeps its state (see the environment after the options).
#[derive(Debug, Default, Args)]
#[command(next_help_heading = "Store")]
struct StoreArgs {
    /// The Redis of `lock = "redis"` jobs; a password in it shows in the process list, prefer
    /// --redis-url-file
    #[arg(long, value_name = "URL", global = true)]
    redis: Option<String>,
    /// A file that holds the Redis URL
    #[arg(long, value_name = "PATH", global = true)]
    redis_url_file: Option<PathBuf>,
    /// The key prefix of the Redis guards (`Builder::redis_prefix`) [default: cronguard]
    #[arg(long, value_name = "P", global = true)]
    prefix: Option<String>,
    /// For rediss://: a PEM file of the CA(s) to trust instead of the system's
    #[arg(long, value_name = "PATH", global = true)]
    redis_ca_file: Option<PathBuf>,
    /// For rediss://: a PEM file of a client certificate (with --redis-client-key-file)
    #[arg(long, value_name = "PATH", global = true)]
    redis_client_cert_file: Option<PathBuf>,
    /// For rediss://: the PEM file of the client certificate's key
    #[arg(long, value_name = "PATH", global = true)]
    redis_client_key_file: Option<PathBuf>,
    /// The PostgreSQL of `lock = "postgres"` jobs, with TLS as its `sslmode` says; a password in
    /// it shows in the process list, prefer --postgres-url-file
    #[arg(long, value_name = "URL", global = true)]
    postgres: Option<String>,
    /// A file that holds the PostgreSQL URL
    #[arg(long, value_name = "PATH", global = true)]
    postgres_url_file: Option<PathBuf>,
    /// The schema of the PostgreSQL guards [default: cronguard]
    #[arg(long, value_name = "S", global = true)]
    schema: Option<String>,
    /// The lock dir of `lock = "file"` jobs
    #[arg(long, value_name = "DIR", global = true)]
    lock_dir: Option<PathBuf>,
    /// Which kind of store to use when the environment names several
    #[arg(long, value_name = "KIND", global = true)]
    store: Option<Kind>,
}

/// A kind of store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Kind {
    /// Redis (`lock = "redis"`).
    Redis,
    /// PostgreSQL (`lock = "postgres"`).
    Postgres,
    /// A lock dir (`lock = "file"`).
    LockDir,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Redis => "a Redis",
            Kind::Postgres => "a PostgreSQL",
            Kind::LockDir => "a lock dir",
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The jobs the replicas announced: schedule, next fire, last run, pause
    List {
        /// JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Pause a job on every replica: its fires are reported as skipped until it is resumed
    Pause {
        /// The job's name
        job: String,
        /// Who pauses it [default: $USER@hostname]
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// Resume a paused job on every replica
    Resume {
        /// The job's name
        job: String,
        /// Who resumes it [default: $USER@hostname]
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// Run a job now, outside its schedule, on exactly one replica; prints the run's key
    #[command(
        long_about = "Run a job now, outside its schedule, on exactly one replica; prints the run's key (`job@manual:<16 hex digits>`), which the run's events and logs carry.\n\nThe run is asked for through the store's control feed, which only the replicas alive then read. So the request is made only when the store shows a live replica of the job: a process of the instance that announced the job last has attended the store within the last 5 s. Otherwise the tool exits with 4 and says what the store shows (no process at all, or only processes of other instances, which may or may not run the job: the store does not record every job of every replica). --force makes the request anyway: a replica that runs the job takes it if it reads the feed within the job's misfire grace; a replica that starts later does not."
    )]
    Trigger {
        /// The job's name
        job: String,
        /// Ask even when the store shows no live replica of the job
        #[arg(long)]
        force: bool,
    },
    /// The processes attending the store (the replicas), and when each was last seen
    Processes {
        /// JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Whether each job's newest due fire ran, told from the store alone: a dead-man check that
    /// still answers when every replica is gone
    #[command(
        long_about = "Whether each job's newest due fire ran, told from the store alone: a dead-man check that still answers when every replica is gone.\n\nFor each job the replicas announced, the newest fire T whose grace (misfire grace plus jitter, 60 s for jobs announced by earlier versions) has passed is missed when the store holds no fate for it (no replica claimed it, nor reported it dropped or missed: no process is running the job), overdue when it was reported dropped or missed but not run, and on time once it or a later fire was claimed. A job of which the store holds no record counts only the fires due since it was announced. Paused jobs are not checked. Run it every few minutes from outside the replicas (cron, a Kubernetes CronJob).",
        after_help = "Exit status:\n  0  every job is on time (or paused)\n  1  a job is missed or overdue; each is named on stderr\n  2  the command line or the settings are wrong\n  3  the store could not be used, or a job's state could not be read (and none is missed or overdue)\n  4  the store's roster holds no job: nothing to check"
    )]
    Health {
        /// JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// A job's run history, where its guard keeps one (`lock = "postgres"`, `history = true`)
    History {
        /// The job's name
        job: String,
        /// From this fire on: an RFC 3339 time, or a duration back from now (`24h`, `7days`)
        #[arg(long, value_name = "WHEN", default_value = "24h")]
        since: String,
        /// JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Serve the store's HTML dashboard: every job, its state, the strip of its recent fires
    /// and its history as the store recorded them, with pause, resume and run now
    #[command(
        long_about = "Serve the store's HTML dashboard until interrupted (Ctrl-C): every job the replicas announced, its state, the strip of its recent fires and a page per job with its history, as the store recorded them (the same on every replica), with pause, resume and run-now buttons that act through the store.\n\nRequests show a token as `Authorization: Bearer <token>`, or as the password of HTTP Basic authentication (a browser asks for it; the user name is recorded as who paused a job). CRONGUARD_DASHBOARD_TOKEN (or the file of CRONGUARD_DASHBOARD_TOKEN_FILE) gives the operator role: read and press the buttons; CRONGUARD_DASHBOARD_READ_TOKEN (or its _FILE) gives read-only access. With a token, every page needs one. Without any token the pages are open and the buttons off, and only a loopback address (127.0.0.1, ::1) is accepted. The dashboard speaks plain HTTP: put it behind a TLS-terminating proxy to reach it from another host."
    )]
    Dashboard {
        /// The address and port to listen on (`127.0.0.1:8080`; a non-loopback address needs a
        /// token)
        #[arg(long, value_name = "ADDR")]
        listen: std::net::SocketAddr,
    },
}

/// Why the tool stops: the exit status, and what to say on stderr.
#[derive(Debug)]
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::USAGE,
            message: message.into(),
        }
    }

    fn other(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::UNHEALTHY,
            message: message.into(),
        }
    }
}

impl From<AdminError> for Failure {
    fn from(e: AdminError) -> Failure {
        let code = match &e {
            AdminError::UnknownJob(_)
            | AdminError::NoLiveReplica(_)
            | AdminError::NoHistory(_)
            | AdminError::Unsupported(_) => exit::REFUSED,
            AdminError::Open { .. } | AdminError::Store { .. } | AdminError::Feed { .. } => {
                exit::STORE
            }
            _ => exit::UNHEALTHY,
        };
        Failure {
            code,
            message: chain(&e),
        }
    }
}

impl From<serde_json::Error> for Failure {
    fn from(e: serde_json::Error) -> Failure {
        Failure::other(format!("cannot write the JSON: {e}"))
    }
}

/// `e` with its causes, `outer: cause: root cause`.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            return ExitCode::from(if usage { exit::USAGE } else { exit::OK });
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            say(&format!("cannot start: {e}"));
            return ExitCode::from(exit::UNHEALTHY);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            say(&failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// Says `message` on stderr, after `cronguard: `, with its control characters escaped.
fn say(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "cronguard: {}", safe(message));
}

/// Prints `text` (already made safe) on stdout. A reader that went away (`cronguard list | head`)
/// is not a failure.
fn emit(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::other(format!("cannot write the output: {e}"))),
    }
}

/// One line of text made safe, on stdout.
fn emit_line(text: &str) -> Result<(), Failure> {
    emit(&format!("{}\n", safe(text)))
}

/// JSON text with the characters a terminal could act on that JSON leaves as they are (DEL, the
/// C1 controls, the bidirectional overrides) escaped as `\uXXXX`; `serde_json` already escapes
/// the C0 controls in strings, so the only ones left are the line breaks of the layout. Each of
/// the others can only stand inside a string, so the JSON stays the same value.
fn emit_json(text: &str) -> Result<(), Failure> {
    emit(&(json_safe(text) + "\n"))
}

/// See [`emit_json`].
fn json_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_hazard(c) && (!c.is_ascii_control() || c == '\u{7f}') {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// A character a terminal may act on instead of showing: the C0 and C1 controls, DEL, and the
/// bidirectional formatting characters (which reorder what a line shows).
fn is_hazard(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every [hazard](is_hazard) escaped: `\n`, `\r`, `\t`, else `\u{1b}`.
fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hazard) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_hazard(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The store the tool opens, with its settings.
#[derive(Debug, PartialEq, Eq)]
enum Chosen {
    Redis {
        url: String,
        prefix: String,
        tls: RedisTlsFiles,
    },
    Postgres {
        url: String,
        schema: String,
    },
    LockDir(PathBuf),
}

/// The environment as the tool reads it: a variable that is unset or blank is not there.
type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The URL held by the file at `path`, which `what` (a flag, a variable) named: its contents
/// without the whitespace around it.
fn url_file(path: &Path, what: &str) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::usage(format!(
            "cannot read the URL file `{}` of {what}: {e}",
            path.display()
        ))
    })?;
    let url = text.trim();
    if url.is_empty() {
        return Err(Failure::usage(format!(
            "the URL file `{}` of {what} is empty; write the store's URL in it",
            path.display()
        )));
    }
    if url.contains(['\n', '\r']) {
        return Err(Failure::usage(format!(
            "the URL file `{}` of {what} holds more than one line; write only the store's URL in it",
            path.display()
        )));
    }
    Ok(url.to_owned())
}

/// The URL of a kind of store: `flag URL`, `flag-file PATH`, else `var`, `<var>_FILE`,
/// `generic`. `None` when none is set. `warnings` gets a warning when the URL given on the
/// command line holds a password.
fn url_of(
    (flag, flag_name): (&Option<String>, &str),
    (file, file_flag): (&Option<PathBuf>, &str),
    (var, generic): (&str, &str),
    env: Env<'_>,
    warnings: &mut Vec<String>,
) -> Result<Option<String>, Failure> {
    let file_var = format!("{var}_FILE");
    match (flag, file) {
        (Some(_), Some(_)) => {
            return Err(Failure::usage(format!(
                "both {flag_name} and {file_flag} are given; give one of them"
            )))
        }
        (Some(url), None) => {
            if holds_password(url) {
                warnings.push(format!(
                    "warning: the URL given with {flag_name} holds a password, which every user of this host can read in the process list; give it with {file_flag} PATH, `{file_var}` or `{var}` instead"
                ));
            }
            return Ok(Some(url.clone()));
        }
        (None, Some(path)) => return url_file(path, file_flag).map(Some),
        (None, None) => {}
    }
    match (env(var), env(&file_var)) {
        (Some(_), Some(_)) => Err(Failure::usage(format!(
            "both `{var}` and `{file_var}` are set; set one of them (`{file_var}` names a file that holds the URL)"
        ))),
        (Some(url), None) => Ok(Some(url)),
        (None, Some(path)) => url_file(Path::new(&path), &format!("`{file_var}`")).map(Some),
        (None, None) => Ok(env(generic)),
    }
}

/// Whether a Redis or PostgreSQL URL (or a PostgreSQL `key=value` string) holds a password:
/// `user:password@`, `:password@`, or a `password`, `pass` or `sentinel_password` parameter.
fn holds_password(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        // The `key=value` form of PostgreSQL.
        return url.split_whitespace().any(|pair| {
            pair.split_once('=')
                .map_or(pair, |(key, _)| key)
                .trim()
                .eq_ignore_ascii_case("password")
        }) || url.to_ascii_lowercase().contains("password =");
    };
    let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
    let in_userinfo = before_query
        .rsplit_once('@')
        .and_then(|(userinfo, _)| userinfo.split_once(':'))
        .is_some_and(|(_, password)| !password.is_empty());
    let in_query = query.split('&').any(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        !value.is_empty()
            && ["password", "pass", "sentinel_password"]
                .iter()
                .any(|k| key.eq_ignore_ascii_case(k))
    });
    in_userinfo || in_query
}

/// Which store, and its settings: from the flags, `--store` and the environment (see
/// [`AFTER_HELP`]).
fn choose(args: &StoreArgs, env: Env<'_>, warnings: &mut Vec<String>) -> Result<Chosen, Failure> {
    let mut flagged: Vec<(Kind, &str)> = Vec::new();
    if args.redis.is_some() || args.redis_url_file.is_some() {
        flagged.push((
            Kind::Redis,
            if args.redis.is_some() {
                "--redis"
            } else {
                "--redis-url-file"
            },
        ));
    }
    if args.postgres.is_some() || args.postgres_url_file.is_some() {
        flagged.push((
            Kind::Postgres,
            if args.postgres.is_some() {
                "--postgres"
            } else {
                "--postgres-url-file"
            },
        ));
    }
    if args.lock_dir.is_some() {
        flagged.push((Kind::LockDir, "--lock-dir"));
    }
    let kind = match (flagged.as_slice(), args.store) {
        ([_, _, ..], _) => {
            return Err(Failure::usage(format!(
                "several stores given ({}); name exactly one store per call",
                flagged
                    .iter()
                    .map(|(_, flag)| *flag)
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
        ([(kind, flag)], Some(store)) if *kind != store => {
            return Err(Failure::usage(format!(
                "{flag} names {} store, but --store asks for {} one; give one of them",
                kind.name(),
                store.name()
            )))
        }
        ([(kind, _)], _) => *kind,
        ([], Some(store)) => store,
        ([], None) => from_env(env)?,
    };
    let misplaced = |given: bool, flag: &str, applies: Kind| -> Result<(), Failure> {
        if given && kind != applies {
            Err(Failure::usage(format!(
                "{flag} applies to {} store, but this call uses {} store",
                applies.name(),
                kind.name()
            )))
        } else {
            Ok(())
        }
    };
    misplaced(args.prefix.is_some(), "--prefix", Kind::Redis)?;
    misplaced(args.redis_ca_file.is_some(), "--redis-ca-file", Kind::Redis)?;
    misplaced(
        args.redis_client_cert_file.is_some(),
        "--redis-client-cert-file",
        Kind::Redis,
    )?;
    misplaced(
        args.redis_client_key_file.is_some(),
        "--redis-client-key-file",
        Kind::Redis,
    )?;
    misplaced(args.schema.is_some(), "--schema", Kind::Postgres)?;
    match kind {
        Kind::Redis => {
            let url = url_of(
                (&args.redis, "--redis"),
                (&args.redis_url_file, "--redis-url-file"),
                ("CRONGUARD_REDIS_URL", "REDIS_URL"),
                env,
                warnings,
            )?
            .ok_or_else(|| Failure::usage("no Redis URL given; give --redis-url-file PATH (or --redis URL), or set CRONGUARD_REDIS_URL, CRONGUARD_REDIS_URL_FILE or REDIS_URL"))?;
            let prefix = args
                .prefix
                .clone()
                .or_else(|| env("CRONGUARD_REDIS_PREFIX"))
                .unwrap_or_else(|| "cronguard".to_owned());
            let file = |flag: &Option<PathBuf>, var: &str| {
                flag.clone().or_else(|| env(var).map(PathBuf::from))
            };
            let mut tls = RedisTlsFiles::new();
            if let Some(ca) = file(&args.redis_ca_file, "CRONGUARD_REDIS_CA_FILE") {
                tls = tls.ca(ca);
            }
            let cert = file(
                &args.redis_client_cert_file,
                "CRONGUARD_REDIS_CLIENT_CERT_FILE",
            );
            let key = file(
                &args.redis_client_key_file,
                "CRONGUARD_REDIS_CLIENT_KEY_FILE",
            );
            match (cert, key) {
                (Some(cert), Some(key)) => tls = tls.client_cert(cert, key),
                (None, None) => {}
                (Some(_), None) => return Err(Failure::usage("a client certificate is given (--redis-client-cert-file or CRONGUARD_REDIS_CLIENT_CERT_FILE) but not its key; give --redis-client-key-file or CRONGUARD_REDIS_CLIENT_KEY_FILE too")),
                (None, Some(_)) => return Err(Failure::usage("a client key is given (--redis-client-key-file or CRONGUARD_REDIS_CLIENT_KEY_FILE) but not its certificate; give --redis-client-cert-file or CRONGUARD_REDIS_CLIENT_CERT_FILE too")),
            }
            Ok(Chosen::Redis { url, prefix, tls })
        }
        Kind::Postgres => {
            let url = url_of(
                (&args.postgres, "--postgres"),
                (&args.postgres_url_file, "--postgres-url-file"),
                ("CRONGUARD_POSTGRES_URL", "DATABASE_URL"),
                env,
                warnings,
            )?
            .ok_or_else(|| Failure::usage("no PostgreSQL URL given; give --postgres-url-file PATH (or --postgres URL), or set CRONGUARD_POSTGRES_URL, CRONGUARD_POSTGRES_URL_FILE or DATABASE_URL"))?;
            let schema = args
                .schema
                .clone()
                .or_else(|| env("CRONGUARD_POSTGRES_SCHEMA"))
                .unwrap_or_else(|| cronguard::DEFAULT_POSTGRES_SCHEMA.to_owned());
            Ok(Chosen::Postgres { url, schema })
        }
        Kind::LockDir => args
            .lock_dir
            .clone()
            .or_else(|| env("CRONGUARD_LOCK_DIR").map(PathBuf::from))
            .map(Chosen::LockDir)
            .ok_or_else(|| {
                Failure::usage("no lock dir given; give --lock-dir DIR or set CRONGUARD_LOCK_DIR")
            }),
    }
}

/// The kind of store the environment names, when no flag does.
fn from_env(env: Env<'_>) -> Result<Kind, Failure> {
    let set = |vars: &[&'static str]| vars.iter().copied().find(|v| env(v).is_some());
    let own: Vec<(Kind, &'static str)> = [
        (
            Kind::Redis,
            set(&["CRONGUARD_REDIS_URL", "CRONGUARD_REDIS_URL_FILE"]),
        ),
        (
            Kind::Postgres,
            set(&["CRONGUARD_POSTGRES_URL", "CRONGUARD_POSTGRES_URL_FILE"]),
        ),
        (Kind::LockDir, set(&["CRONGUARD_LOCK_DIR"])),
    ]
    .into_iter()
    .filter_map(|(kind, var)| var.map(|v| (kind, v)))
    .collect();
    let generic: Vec<(Kind, &'static str)> = [
        (Kind::Redis, set(&["REDIS_URL"])),
        (Kind::Postgres, set(&["DATABASE_URL"])),
    ]
    .into_iter()
    .filter_map(|(kind, var)| var.map(|v| (kind, v)))
    .collect();
    let found = if own.is_empty() { generic } else { own };
    match found.as_slice() {
        [(kind, _)] => Ok(*kind),
        [] => Err(Failure::usage("no store given; name the replicas' store with --redis-url-file PATH, --postgres-url-file PATH or --lock-dir DIR (or --redis URL, --postgres URL), or set CRONGUARD_REDIS_URL, CRONGUARD_POSTGRES_URL, CRONGUARD_LOCK_DIR (see --help)")),
        several => Err(Failure::usage(format!(
            "several stores given by the environment ({}); pick one with --store redis, --store postgres or --store lock-dir",
            several.iter().map(|(_, v)| *v).collect::<Vec<_>>().join(", ")
        ))),
    }
}

async fn open(chosen: Chosen) -> Result<Store, Failure> {
    Ok(match chosen {
        Chosen::Redis { url, prefix, tls } => Store::redis_tls(&url, &prefix, &tls).await?,
        Chosen::Postgres { url, schema } => Store::postgres(&url, &schema).await?,
        Chosen::LockDir(dir) => Store::lock_dir(dir)?,
    })
}

async fn run(cli: Cli) -> Result<u8, Failure> {
    let mut warnings = Vec::new();
    let chosen = choose(&cli.store, &process_env, &mut warnings)?;
    for warning in &warnings {
        say(warning);
    }
    if let Command::History { since, .. } = &cli.command {
        // A wrong command line is told before the store is opened.
        parse_since(since, Utc::now())?;
    }
    let tokens = match &cli.command {
        Command::Dashboard { listen } => Some(dashboard_tokens(*listen, &process_env)?),
        _ => None,
    };
    let store = open(chosen).await?;
    match cli.command {
        Command::Dashboard { listen } => {
            serve_dashboard(store, listen, tokens.flatten()).await?;
        }
        Command::Health { json } => {
            let health = store.health().await?;
            if json {
                emit_json(&serde_json::to_string_pretty(&health)?)?;
            } else if health.jobs.is_empty() {
                emit_line("no jobs: no replica has announced a job in this store")?;
            } else {
                emit(&health_table(&health))?;
            }
            return Ok(verdict(&health));
        }
        Command::List { json } => {
            let jobs = store.jobs().await?;
            if json {
                emit_json(&serde_json::to_string_pretty(&jobs)?)?;
            } else if jobs.is_empty() {
                emit_line("no jobs: no replica has announced a job in this store yet (a replica announces its jobs when it starts)")?;
            } else {
                emit(&jobs_table(&jobs))?;
            }
        }
        Command::Processes { json } => {
            let processes = store.processes().await?;
            if json {
                emit_json(&serde_json::to_string_pretty(&processes)?)?;
            } else if processes.is_empty() {
                emit_line("no processes: no replica has attended this store")?;
            } else {
                emit(&processes_table(&processes))?;
            }
        }
        Command::Pause { job, by } => {
            let by = by.unwrap_or_else(operator);
            store.pause(&job, &by).await?;
            emit_line(&format!(
                "paused `{job}` (by {by}); the replicas skip its fires until it is resumed"
            ))?;
        }
        Command::Resume { job, by } => {
            let by = by.unwrap_or_else(operator);
            store.resume(&job, &by).await?;
            emit_line(&format!("resumed `{job}` (by {by})"))?;
        }
        Command::Trigger { job, force } => {
            let key = if force {
                // Said, not refused: the operator asked for it.
                match store.liveness(&job).await {
                    Ok(liveness) if !liveness.is_live() => say(&format!(
                        "warning: the store shows no live replica of job `{job}`; the run is asked for anyway (--force), and starts only if a replica that runs the job reads the control feed within the job's misfire grace"
                    )),
                    _ => {}
                }
                store.trigger(&job).await?
            } else {
                store.trigger_if_live(&job).await?
            };
            emit_line(&key)?;
        }
        Command::History { job, since, json } => {
            let since = parse_since(&since, Utc::now())?;
            let entries = store.history(&job, since).await?;
            if json {
                emit_json(&serde_json::to_string_pretty(&entries)?)?;
            } else if entries.is_empty() {
                emit_line(&format!("no runs of `{job}` since {}", time(since)))?;
            } else {
                emit(&history_table(&entries))?;
            }
        }
    }
    Ok(exit::OK)
}

/// The secret held by variable `var` or by the file its `_FILE` twin names (trimmed); `None`
/// when neither is set.
fn secret_of(var: &str, env: Env<'_>) -> Result<Option<String>, Failure> {
    let file_var = format!("{var}_FILE");
    match (env(var), env(&file_var)) {
        (Some(_), Some(_)) => Err(Failure::usage(format!(
            "both `{var}` and `{file_var}` are set; set one of them (`{file_var}` names a file that holds the token)"
        ))),
        (Some(token), None) => Ok(Some(token.trim().to_owned())),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                Failure::usage(format!("cannot read the token file `{path}` of `{file_var}`: {e}"))
            })?;
            let token = text.trim();
            if token.is_empty() {
                return Err(Failure::usage(format!(
                    "the token file `{path}` of `{file_var}` is empty; write the token in it"
                )));
            }
            Ok(Some(token.to_owned()))
        }
        (None, None) => Ok(None),
    }
}

/// The dashboard's tokens from the environment; `None` when none is set, which only a loopback
/// address accepts.
fn dashboard_tokens(
    listen: std::net::SocketAddr,
    env: Env<'_>,
) -> Result<Option<cronguard_dashboard::Tokens>, Failure> {
    let operator = secret_of("CRONGUARD_DASHBOARD_TOKEN", env)?;
    let viewer = secret_of("CRONGUARD_DASHBOARD_READ_TOKEN", env)?;
    if operator.is_some() && operator == viewer {
        return Err(Failure::usage(
            "`CRONGUARD_DASHBOARD_TOKEN` and `CRONGUARD_DASHBOARD_READ_TOKEN` hold the same token; give the read-only token a value of its own",
        ));
    }
    if operator.is_none() && viewer.is_none() {
        if !listen.ip().is_loopback() {
            return Err(Failure::usage(format!(
                "refusing to serve the dashboard on {listen} without a token: anyone who reaches that address could read the jobs. Set CRONGUARD_DASHBOARD_TOKEN (or CRONGUARD_DASHBOARD_TOKEN_FILE, a file that holds it), or listen on a loopback address such as 127.0.0.1:{}",
                listen.port()
            )));
        }
        return Ok(None);
    }
    let mut tokens = cronguard_dashboard::Tokens::new();
    if let Some(operator) = operator {
        tokens = tokens.operator(operator);
    }
    if let Some(viewer) = viewer {
        tokens = tokens.viewer(viewer);
    }
    Ok(Some(tokens))
}

/// Serves the store's dashboard on `listen` until Ctrl-C or SIGTERM.
async fn serve_dashboard(
    store: Store,
    listen: std::net::SocketAddr,
    tokens: Option<cronguard_dashboard::Tokens>,
) -> Result<(), Failure> {
    let guarded = tokens.is_some();
    let mut dashboard = cronguard_dashboard::Dashboard::for_store(store);
    if let Some(tokens) = tokens {
        dashboard = dashboard.tokens(tokens);
    }
    let app: axum::Router = dashboard.router();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Failure::other(format!("cannot listen on {listen}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::other(format!("cannot listen on {listen}: {e}")))?;
    say(&format!(
        "serving the dashboard at http://{bound}/ ({}); Ctrl-C stops it",
        if guarded {
            "every page needs a token"
        } else {
            "open to this host, buttons off: set CRONGUARD_DASHBOARD_TOKEN to turn them on"
        }
    ));
    axum::serve(listener, app)
        .with_graceful_shutdown(stopped())
        .await
        .map_err(|e| Failure::other(format!("the dashboard stopped: {e}")))
}

/// Ctrl-C, or SIGTERM on Unix.
async fn stopped() {
    #[cfg(unix)]
    {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut term) => {
                    term.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = term => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The exit status of `health`, with the jobs that make it on stderr.
fn verdict(health: &StoreHealth) -> u8 {
    let late: Vec<String> = health
        .jobs
        .iter()
        .filter(|job| job.state.is_late())
        .map(|job| {
            let what = match job.state {
                StoredJobState::Missed => {
                    "missed: no process gave it a fate; is any replica running the job?"
                }
                _ => "overdue: it was reported dropped or missed, and no later fire ran",
            };
            format!("`{}` (fire {}, {what})", job.name, or_dash(job.due))
        })
        .collect();
    if !late.is_empty() {
        say(&format!(
            "the newest due fire did not run for {}: {}",
            if late.len() == 1 {
                "1 job".to_owned()
            } else {
                format!("{} jobs", late.len())
            },
            late.join("; ")
        ));
        return exit::UNHEALTHY;
    }
    if health.jobs.is_empty() {
        say("nothing to check: no replica has announced a job in this store (a replica announces its jobs when it starts; a store that lost its data lost its roster too)");
        return exit::REFUSED;
    }
    let unknown: Vec<&str> = health
        .jobs
        .iter()
        .filter(|job| matches!(job.state, StoredJobState::Unknown { .. }))
        .map(|job| job.name.as_str())
        .collect();
    if !unknown.is_empty() {
        say(&format!(
            "the state of {} could not be told (see the table)",
            unknown
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return exit::STORE;
    }
    exit::OK
}

/// `$USER@hostname`.
fn operator() -> String {
    let user = process_env("USER")
        .or_else(|| process_env("LOGNAME"))
        .unwrap_or_else(|| "unknown".to_owned());
    format!("{user}@{}", gethostname::gethostname().to_string_lossy())
}

/// An RFC 3339 time, or a duration back from `now`.
fn parse_since(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, Failure> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    let back = humantime::parse_duration(text).map_err(|e| {
        Failure::usage(format!("--since `{text}` is neither an RFC 3339 time (2026-01-31T08:00:00Z) nor a duration (24h, 7days): {e}"))
    })?;
    chrono::TimeDelta::from_std(back)
        .ok()
        .and_then(|back| now.checked_sub_signed(back))
        .ok_or_else(|| Failure::usage(format!("--since `{text}` reaches too far back")))
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn or_dash(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(|| "-".to_owned(), time)
}

/// Rows under a header, each column as wide as its widest cell, every cell made safe.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|row| row.iter().map(|cell| safe(cell).into_owned()).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    let mut out = line(&header);
    for row in &rows {
        out.push_str(&line(row));
    }
    out
}

fn jobs_table(jobs: &[StoredJob]) -> String {
    let rows = jobs
        .iter()
        .map(|job| {
            vec![
                job.name.clone(),
                job.schedule.clone(),
                or_dash(job.next_fire),
                or_dash(job.last_claimed),
                job.paused.as_ref().map_or_else(
                    || "-".to_owned(),
                    |p| format!("by {} at {}", p.by, time(p.at)),
                ),
            ]
        })
        .collect();
    table(
        &["JOB", "SCHEDULE", "NEXT FIRE", "LAST RUN", "PAUSED"],
        rows,
    )
}

fn processes_table(processes: &[StoreProcess]) -> String {
    let rows = processes
        .iter()
        .map(|p| {
            vec![
                p.instance.clone(),
                p.pid.map_or_else(|| "-".to_owned(), |pid| pid.to_string()),
                format!(
                    "{} ago",
                    humantime::format_duration(whole_seconds(p.seen_ago))
                ),
                if p.present { "yes" } else { "no" }.to_owned(),
            ]
        })
        .collect();
    table(&["INSTANCE", "PID", "LAST SEEN", "PRESENT"], rows)
}

/// `d` without its fraction of a second (`3s`, not `3s 120ms 5us`).
fn whole_seconds(d: std::time::Duration) -> std::time::Duration {
    std::time::Duration::from_secs(d.as_secs())
}

fn health_table(health: &StoreHealth) -> String {
    let rows = health
        .jobs
        .iter()
        .map(|job| {
            let (state, detail) = match &job.state {
                StoredJobState::OnTime => ("on time", String::new()),
                StoredJobState::Missed => (
                    "missed",
                    "no fate in the store: no process is running it".to_owned(),
                ),
                StoredJobState::Overdue => {
                    ("overdue", "reported dropped or missed, not run".to_owned())
                }
                StoredJobState::Paused { pause } => {
                    ("paused", format!("by {} at {}", pause.by, time(pause.at)))
                }
                StoredJobState::Unknown { reason } => ("unknown", reason.clone()),
                _ => ("?", String::new()),
            };
            vec![
                job.name.clone(),
                state.to_owned(),
                or_dash(job.due),
                or_dash(job.fate_point),
                or_dash(job.last_claimed),
                detail,
            ]
        })
        .collect();
    table(
        &[
            "JOB",
            "STATE",
            "DUE FIRE",
            "FATE POINT",
            "LAST CLAIMED",
            "DETAIL",
        ],
        rows,
    )
}

fn history_table(entries: &[HistoryEntry]) -> String {
    let rows = entries
        .iter()
        .map(|e| {
            vec![
                time(e.fire_time),
                e.outcome.to_string(),
                e.instance.clone(),
                e.fencing_token
                    .map_or_else(|| "-".to_owned(), |t| t.to_string()),
                e.lateness.map_or_else(
                    || "-".to_owned(),
                    |l| humantime::format_duration(l).to_string(),
                ),
                e.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &["FIRE", "OUTCOME", "INSTANCE", "TOKEN", "LATENESS", "ERROR"],
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_time_or_a_duration_back() {
        let now = DateTime::parse_from_rfc3339("2026-02-01T12:00:00Z")
            .expect("valid")
            .with_timezone(&Utc);
        assert_eq!(
            time(parse_since("24h", now).expect("a duration")),
            "2026-01-31T12:00:00Z"
        );
        assert_eq!(
            time(parse_since("2026-01-01T00:00:00+01:00", now).expect("a time")),
            "2025-12-31T23:00:00Z"
        );
        let wrong = parse_since("yesterday", now).expect_err("neither");
        assert_eq!(wrong.code, exit::USAGE);
    }

    #[test]
    fn tables_align_their_columns() {
        let out = table(
            &["A", "BB"],
            vec![
                vec!["long".into(), "x".into()],
                vec!["s".into(), "y".into()],
            ],
        );
        assert_eq!(out, "A     BB\nlong  x\ns     y\n");
    }

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert!(matches!(safe("plain: `job` ü 日本"), Cow::Borrowed(_)));
        assert_eq!(
            safe("a\u{1b}[2Jb\r\nc\td\u{7f}e\u{9b}f\u{202e}g\0"),
            "a\\u{1b}[2Jb\\r\\nc\\td\\u{7f}e\\u{9b}f\\u{202e}g\\u{0}"
        );
        let cells = table(&["X"], vec![vec!["a\u{1b}]0;t\u{7}".into()]]);
        assert_eq!(cells, "X\na\\u{1b}]0;t\\u{7}\n");
    }

    #[test]
    fn json_keeps_its_layout_and_escapes_what_it_would_leave() {
        let text = serde_json::to_string_pretty(&["a\u{1b}b\u{9b}c\u{7f}d\u{202e}"]).expect("JSON");
        let escaped = json_safe(&text);
        assert_eq!(escaped, "[\n  \"a\\u001bb\\u009bc\\u007fd\\u202e\"\n]");
        let back: Vec<String> = serde_json::from_str(&escaped).expect("still JSON");
        assert_eq!(back, ["a\u{1b}b\u{9b}c\u{7f}d\u{202e}"]);
    }

    #[test]
    fn passwords_in_urls_are_found() {
        for with in [
            "redis://:s3cret@host:6379/0",
            "redis://app:s3cret@host",
            "rediss://app:p@ss/w@host:6380",
            "redis+sentinel://host:26379/primary?sentinel_password=x",
            "redis+unix:///run/redis.sock?pass=x",
            "postgres://ops:pw@db/app",
            "postgresql://db/app?user=ops&password=pw",
            "host=db user=ops password=pw",
            "host=db password = 'pw'",
        ] {
            assert!(holds_password(with), "{with}");
        }
        for without in [
            "redis://host:6379/0",
            "redis://app@host",
            "redis://app:@host",
            "postgres://ops@db/app?sslmode=require",
            "host=db user=ops",
        ] {
            assert!(!holds_password(without), "{without}");
        }
    }

    /// `choose` over an environment of `vars`.
    fn chosen(args: &StoreArgs, vars: &[(&str, &str)]) -> (Result<Chosen, Failure>, Vec<String>) {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let env = move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let mut warnings = Vec::new();
        (choose(args, &env, &mut warnings), warnings)
    }

    fn redis(url: &str) -> Chosen {
        Chosen::Redis {
            url: url.to_owned(),
            prefix: "cronguard".to_owned(),
            tls: RedisTlsFiles::new(),
        }
    }

    #[test]
    fn the_store_comes_from_a_flag_else_the_own_variables_else_the_generic_ones() {
        let none = StoreArgs::default();
        let (got, _) = chosen(&none, &[("REDIS_URL", "redis://generic")]);
        assert_eq!(got.expect("generic"), redis("redis://generic"));
        let (got, _) = chosen(
            &none,
            &[
                ("REDIS_URL", "redis://generic"),
                ("CRONGUARD_REDIS_URL", "redis://own"),
                ("DATABASE_URL", "postgres://app-db"),
            ],
        );
        assert_eq!(
            got.expect("own beats generic, of either kind"),
            redis("redis://own")
        );
        let (got, _) = chosen(
            &none,
            &[
                ("REDIS_URL", "redis://generic"),
                ("DATABASE_URL", "postgres://db"),
            ],
        );
        let several = got.expect_err("two generic stores");
        assert!(
            several.code == exit::USAGE && several.message.contains("--store"),
            "{several:?}"
        );
        let pick = StoreArgs {
            store: Some(Kind::Postgres),
            ..StoreArgs::default()
        };
        let (got, _) = chosen(
            &pick,
            &[
                ("CRONGUARD_REDIS_URL", "redis://own"),
                ("DATABASE_URL", "postgres://db"),
                ("CRONGUARD_POSTGRES_SCHEMA", "jobs"),
            ],
        );
        assert_eq!(
            got.expect("--store picks"),
            Chosen::Postgres {
                url: "postgres://db".to_owned(),
                schema: "jobs".to_owned()
            }
        );
        let flag = StoreArgs {
            redis: Some("redis://:pw@flag".to_owned()),
            prefix: Some("p".to_owned()),
            ..StoreArgs::default()
        };
        let (got, warnings) = chosen(&flag, &[("CRONGUARD_REDIS_URL", "redis://own")]);
        assert_eq!(
            got.expect("the flag wins"),
            Chosen::Redis {
                url: "redis://:pw@flag".to_owned(),
                prefix: "p".to_owned(),
                tls: RedisTlsFiles::new()
            }
        );
        assert!(
            warnings.len() == 1
                && warnings[0].contains("process list")
                && !warnings[0].contains("pw"),
            "{warnings:?}"
        );
        let (got, _) = chosen(
            &none,
            &[
                ("CRONGUARD_REDIS_URL", "redis://own"),
                ("CRONGUARD_REDIS_URL_FILE", "/run/secrets/redis-url"),
            ],
        );
        let twins = got.expect_err("a variable and its twin");
        assert!(
            twins
                .message
                .contains("both `CRONGUARD_REDIS_URL` and `CRONGUARD_REDIS_URL_FILE`"),
            "{twins:?}"
        );
        let misplaced = StoreArgs {
            schema: Some("s".to_owned()),
            ..StoreArgs::default()
        };
        let (got, _) = chosen(&misplaced, &[("CRONGUARD_REDIS_URL", "redis://own")]);
        assert!(got
            .expect_err("--schema with Redis")
            .message
            .contains("--schema applies to a PostgreSQL store"));
        let (got, _) = chosen(
            &none,
            &[
                ("CRONGUARD_REDIS_URL", "rediss://own"),
                ("CRONGUARD_REDIS_CLIENT_CERT_FILE", "/c.pem"),
            ],
        );
        assert!(got
            .expect_err("a certificate without its key")
            .message
            .contains("not its key"));
    }
}
