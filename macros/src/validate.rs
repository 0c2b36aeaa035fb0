//! Checks the arguments and the function's signature and turns them into a [`Job`], collecting
//! every mistake so one compile reports them all.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::ext::IdentExt;
use syn::{FnArg, Ident, ItemFn, Lit, LitInt, LitStr, ReturnType, Type};

use cronguard_schedule::settings::{self, Form};

use crate::args::{self, Arg, Value};
use crate::duration;
use crate::errors::Errors;

/// The default `lease` of a `redis` guard, in milliseconds (shared with the runtime).
pub(crate) const DEFAULT_LEASE_MILLIS: u64 = cronguard_schedule::DEFAULT_LEASE.as_millis() as u64;
/// The default `misfire_grace`, in milliseconds (shared with the runtime).
pub(crate) const DEFAULT_MISFIRE_GRACE_MILLIS: u64 =
    cronguard_schedule::DEFAULT_MISFIRE_GRACE.as_millis() as u64;

/// The values of a one-of argument (`lock`, `overlap`) that are written as they are.
fn choices(key: &str) -> Vec<&'static str> {
    form(key)
        .map(|form| form.plain_choices())
        .unwrap_or_default()
}

/// What the value of the argument `key` is.
fn form(key: &str) -> Option<Form> {
    settings::attribute(key).map(|setting| setting.form)
}

/// A checked `#[scheduled]` attribute and function, ready to expand.
pub(crate) struct Job {
    /// `name = "..."` as written, or `None` for `module_path::fn_name`.
    pub(crate) name: Option<LitStr>,
    /// When it fires.
    pub(crate) schedule: Schedule,
    /// The guard.
    pub(crate) guard: Guard,
    /// The lease of a guard with leases (`redis`, `postgres`, custom).
    pub(crate) lease_millis: u64,
    /// Whether the guard keeps the run history (`history`).
    pub(crate) history: bool,
    /// Runs allowed at once.
    pub(crate) max_instances: u32,
    /// What a fire does when no slot is free.
    pub(crate) overlap: Overlap,
    /// Whether waiting fires are coalesced.
    pub(crate) coalesce: bool,
    /// How late a fire may still start.
    pub(crate) misfire_grace_millis: u64,
    /// `timeout`, `retries`, `backoff` and `jitter`.
    pub(crate) limits: Limits,
    /// The parts of the signature the expansion needs.
    pub(crate) signature: Signature,
    /// `crate = "..."`: the path of the `cronguard` crate, for a re-exported or renamed
    /// dependency; `None` for `::cronguard`.
    pub(crate) krate: Option<syn::Path>,
}

/// The per-job limits, in milliseconds; 0 where not given.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) timeout_millis: u64,
    pub(crate) retries: u32,
    pub(crate) backoff_millis: u64,
    pub(crate) jitter_millis: u64,
    /// `standby`; `None` where not given (zero is a value: every process claims at once).
    pub(crate) standby_millis: Option<u64>,
}

/// When a job fires.
pub(crate) enum Schedule {
    /// `cron = "..."` (emitted as written) in `tz` (the literal as written, or `None` for UTC).
    Cron { expr: LitStr, tz: Option<LitStr> },
    /// `every = "..."` in milliseconds.
    Every { millis: u64 },
}

/// The guard of a job.
#[derive(Clone, Debug)]
pub(crate) enum Guard {
    /// `lock = "local"`.
    Local,
    /// `lock = "file"`.
    File,
    /// `lock = "redis"`; the span is the `"redis"` literal's.
    Redis(Span),
    /// `lock = "postgres"`; the span is the `"postgres"` literal's.
    Postgres(Span),
    /// `lock = "custom:<name>"`: the name.
    Custom(String),
}

impl Guard {
    /// The value of `lock = "..."` that names this guard.
    fn name(&self) -> &str {
        match self {
            Guard::Local => "local",
            Guard::File => "file",
            Guard::Redis(_) => "redis",
            Guard::Postgres(_) => "postgres",
            Guard::Custom(_) => "custom",
        }
    }

    /// Whether runs hold an expiring lease (so `lease` applies).
    fn has_lease(&self) -> bool {
        matches!(
            self,
            Guard::Redis(_) | Guard::Postgres(_) | Guard::Custom(_)
        )
    }
}

/// What a fire does when no instance slot is free.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Overlap {
    /// `overlap = "skip"`.
    Skip,
    /// `overlap = "queue"`.
    Queue,
    /// `overlap = "replace"`.
    Replace,
}

/// What the expansion needs to know about the function.
pub(crate) struct Signature {
    /// `async fn` (else a plain `fn`, run on the blocking pool).
    pub(crate) is_async: bool,
    /// The arguments' types as written, in order: a `JobContext` or a `State<T>` each.
    pub(crate) params: Vec<Type>,
    /// The declared return type; `None` for `()`.
    pub(crate) output: Option<Type>,
}

/// Checks everything; on failure returns all errors combined.
pub(crate) fn check(args: TokenStream, func: &ItemFn) -> syn::Result<Job> {
    let mut errors = Errors::new();
    let parsed = args::parse(args, &mut errors);
    let args = Args::collect(parsed, &mut errors);
    // After a malformed or unknown argument (`interval = "30s"`), "missing schedule" would only
    // repeat the same mistake.
    let syntax_ok = errors.count() == 0;
    let job = check_args(&args, syntax_ok, &mut errors);
    let signature = check_signature(&func.sig, &mut errors);
    errors.finish()?;
    let Some(mut job) = job else {
        // Every path that yields no job reports an error, but never panic on user input.
        return Err(syn::Error::new(
            Span::call_site(),
            "invalid `#[scheduled]` arguments",
        ));
    };
    job.signature = signature;
    Ok(job)
}

/// The known arguments in the order written; duplicates and unknown names already reported.
struct Args {
    written: Vec<(&'static str, Arg)>,
}

impl Args {
    fn collect(parsed: Vec<Arg>, errors: &mut Errors) -> Self {
        let mut known: Vec<(&'static str, Arg)> = Vec::new();
        for arg in parsed {
            let written = arg.key.unraw().to_string();
            let Some(key) = settings::attribute(&written).and_then(|setting| setting.attribute)
            else {
                let names = settings::attributes();
                errors.at(
                    arg.key.span(),
                    format!(
                        "unknown argument `{written}`;{} expected one of: {}",
                        did_you_mean(&written, &names),
                        args::list(&names)
                    ),
                );
                continue;
            };
            if known.iter().any(|(seen, _)| *seen == key) {
                errors.at(
                    arg.key.span(),
                    format!("duplicate argument `{key}`; each argument may be given once, remove this one"),
                );
                continue;
            }
            known.push((key, arg));
        }
        Args { written: known }
    }

    fn get(&self, key: &str) -> Option<&Arg> {
        debug_assert!(
            settings::attribute(key).is_some(),
            "`{key}` is not an argument in the settings table"
        );
        self.written
            .iter()
            .find(|(known, _)| *known == key)
            .map(|(_, arg)| arg)
    }

    /// Where `key` stands among the arguments as written.
    fn index(&self, key: &str) -> Option<usize> {
        self.written.iter().position(|(known, _)| *known == key)
    }

    fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    fn key(&self, key: &str) -> Option<&Ident> {
        self.get(key).map(|arg| &arg.key)
    }

    /// A string argument's literal; reports a missing value or a value of another kind.
    fn string(&self, key: &str, errors: &mut Errors) -> Option<LitStr> {
        let arg = self.get(key)?;
        match &arg.value {
            Value::Lit(Lit::Str(lit)) => Some(lit.clone()),
            Value::Flag | Value::Missing => {
                errors.at(arg.key.span(), missing_value(key));
                None
            }
            Value::Lit(Lit::Int(int)) if int.suffix().is_empty() && is_duration(key) => {
                errors.on(
                    int,
                    format!(
                        "`{key}` takes a string literal with a unit; write `{key} = \"{}s\"`",
                        int.base10_digits()
                    ),
                );
                None
            }
            Value::Lit(Lit::Bool(_)) | Value::Lit(_) | Value::NegInt(_) | Value::Other(_) => {
                let tokens = value_tokens(&arg.value);
                match single_token_text(&tokens).filter(|text| valid_unquoted(key, text)) {
                    Some(text) => errors.on(
                        &tokens,
                        format!("`{key}` takes a string literal; write `{key} = \"{text}\"`"),
                    ),
                    None => errors.on(
                        &tokens,
                        format!(
                            "`{key}` takes a string literal such as `{}`; the macro checks it at compile time, so constants and expressions cannot be used",
                            example(key)
                        ),
                    ),
                }
                None
            }
            Value::Invalid => None,
        }
    }

    /// An integer argument; reports a missing value or a value of another kind. Negative numbers
    /// are returned as `Err(literal)`.
    fn integer(&self, key: &str, errors: &mut Errors) -> Option<Result<LitInt, LitInt>> {
        let arg = self.get(key)?;
        match &arg.value {
            Value::Lit(Lit::Int(int)) => Some(Ok(int.clone())),
            Value::NegInt(int) => Some(Err(int.clone())),
            Value::Flag | Value::Missing => {
                errors.at(arg.key.span(), missing_value(key));
                None
            }
            Value::Lit(Lit::Str(lit)) if lit.value().trim().parse::<u64>().is_ok() => {
                errors.on(
                    lit,
                    format!(
                        "`{key}` takes an integer literal, not a string; write `{key} = {}`",
                        lit.value().trim()
                    ),
                );
                None
            }
            Value::Lit(_) | Value::Other(_) => {
                errors.on(
                    value_tokens(&arg.value),
                    format!(
                        "`{key}` takes an integer literal such as `{}`",
                        example(key)
                    ),
                );
                None
            }
            Value::Invalid => None,
        }
    }

    /// A flag: `Some(true)` if given; reports `flag = value`.
    fn flag(&self, key: &str, errors: &mut Errors) -> bool {
        let Some(arg) = self.get(key) else {
            return false;
        };
        match &arg.value {
            Value::Flag => true,
            Value::Invalid => false,
            value => {
                let off = matches!(value, Value::Lit(Lit::Bool(b)) if !b.value);
                let extra = if off {
                    format!(" (leave it out to keep `{key}` off)")
                } else {
                    String::new()
                };
                errors.at(
                    arg.key.span(),
                    format!("`{key}` is a flag and takes no value; write `{key}`{extra}"),
                );
                false
            }
        }
    }
}

/// " did you mean `x`?" when `written` is close to one of `candidates`, else "".
fn did_you_mean(written: &str, candidates: &[&str]) -> String {
    settings::closest(written, candidates)
        .map(|close| format!(" did you mean `{close}`?"))
        .unwrap_or_default()
}

fn is_duration(key: &str) -> bool {
    form(key) == Some(Form::Duration)
}

/// An example of a correct argument, for error messages.
fn example(key: &str) -> &'static str {
    match key {
        "cron" => "cron = \"0 */5 * * * *\"",
        "every" => "every = \"30s\"",
        "tz" => "tz = \"Europe/Berlin\"",
        "lock" => "lock = \"redis\"",
        "lease" => "lease = \"10s\"",
        "max_instances" => "max_instances = 2",
        "overlap" => "overlap = \"queue\"",
        "misfire_grace" => "misfire_grace = \"60s\"",
        "timeout" => "timeout = \"5m\"",
        "retries" => "retries = 3",
        "backoff" => "backoff = \"10s\"",
        "jitter" => "jitter = \"30s\"",
        "standby" => "standby = \"2s\"",
        "name" => "name = \"billing::settle_orders\"",
        "crate" => "crate = \"my_framework::cronguard\"",
        _ => "coalesce",
    }
}

fn missing_value(key: &str) -> String {
    match key {
        "lock" => format!(
            "`lock` needs a value; write {}",
            choices_of("lock", &choices("lock"))
        ),
        "overlap" => format!(
            "`overlap` needs a value; write {}",
            choices_of("overlap", &choices("overlap"))
        ),
        _ => format!("`{key}` needs a value; write `{}`", example(key)),
    }
}

/// "`key = "a"`, `key = "b"` or `key = "c"`".
fn choices_of(key: &str, values: &[&str]) -> String {
    let written: Vec<String> = values.iter().map(|v| format!("{key} = \"{v}\"")).collect();
    let refs: Vec<&str> = written.iter().map(String::as_str).collect();
    args::choices(&refs)
}

fn value_tokens(value: &Value) -> TokenStream {
    match value {
        Value::Lit(lit) => quote::quote!(#lit),
        Value::NegInt(int) => quote::quote!(-#int),
        Value::Other(tokens) => tokens.clone(),
        Value::Flag | Value::Missing | Value::Invalid => TokenStream::new(),
    }
}

/// Whether `text`, put in quotes, is a valid value of `key`: only then does the error suggest
/// quoting it (`lock = redis`, `tz = UTC`, `every = 30s`), never for a constant's name.
fn valid_unquoted(key: &str, text: &str) -> bool {
    match form(key) {
        Some(form @ Form::OneOf(_)) => form.plain_choices().contains(&text),
        Some(Form::TimeZone) => cronguard_schedule::parse_time_zone(text).is_ok(),
        Some(Form::Duration) => cronguard_schedule::parse_duration(text).is_ok(),
        _ => false,
    }
}

/// The text of a value that is one identifier or one literal, to suggest it quoted.
fn single_token_text(tokens: &TokenStream) -> Option<String> {
    let mut iter = tokens.clone().into_iter();
    match (iter.next(), iter.next()) {
        (Some(TokenTree::Ident(ident)), None) => Some(ident.to_string()),
        (Some(TokenTree::Literal(literal)), None) => {
            let text = literal.to_string();
            // Characters, byte strings and the like: no sensible quoted form.
            (!text.contains(['"', '\''])).then_some(text)
        }
        _ => None,
    }
}

/// `syntax_ok`: no argument was malformed or unknown, so "missing schedule" is not a consequence of a
/// mistake already reported (such as `#[scheduled("0 * * * * *")]`).
fn check_args(args: &Args, syntax_ok: bool, errors: &mut Errors) -> Option<Job> {
    let schedule = check_schedule(args, syntax_ok, errors);
    let guard = check_lock(args, errors);
    let lease_millis = check_lease(args, guard.as_ref(), errors);
    let max_instances = check_max_instances(args, guard.as_ref(), errors);
    let history = check_history(args, guard.as_ref(), errors);
    let overlap = check_overlap(args, errors);
    let coalesce = args.flag("coalesce", errors);
    let misfire_grace_millis = args
        .string("misfire_grace", errors)
        .map(|lit| duration_or_report(&lit, errors))
        .unwrap_or(Some(DEFAULT_MISFIRE_GRACE_MILLIS));
    let limits = check_limits(args, errors);
    if let (Some(schedule), Some(limits)) = (&schedule, &limits) {
        check_jitter_gap(args, schedule, limits, errors);
    }
    let name = args.string("name", errors);
    if let Some(name) = &name {
        if let Err(message) = check_name(&name.value()) {
            errors.on(name, message);
        }
    }
    let krate = check_crate(args, errors);
    Some(Job {
        name,
        schedule: schedule?,
        guard: guard?,
        lease_millis: lease_millis?,
        history: history?,
        max_instances: max_instances?,
        overlap: overlap?,
        coalesce,
        misfire_grace_millis: misfire_grace_millis?,
        limits: limits?,
        signature: Signature {
            is_async: false,
            params: Vec::new(),
            output: None,
        },
        krate: krate?,
    })
}

/// `crate = "path::to::cronguard"`: a path, without generic arguments. `Some(None)` when absent.
fn check_crate(args: &Args, errors: &mut Errors) -> Option<Option<syn::Path>> {
    if !args.has("crate") {
        return Some(None);
    }
    let lit = args.string("crate", errors)?;
    match lit.parse::<syn::Path>() {
        Ok(path)
            if path
                .segments
                .iter()
                .all(|segment| segment.arguments.is_none()) =>
        {
            Some(Some(path))
        }
        _ => {
            errors.on(
                &lit,
                format!(
                    "`crate` takes the path of the cronguard crate, such as `crate = \"my_framework::cronguard\"`; `{}` is not a path",
                    lit.value()
                ),
            );
            None
        }
    }
}

fn duration_or_report(lit: &LitStr, errors: &mut Errors) -> Option<u64> {
    match duration::to_millis(lit) {
        Ok(millis) => Some(millis),
        Err(error) => {
            errors.push(error);
            None
        }
    }
}

fn check_schedule(args: &Args, syntax_ok: bool, errors: &mut Errors) -> Option<Schedule> {
    let cron = args.string("cron", errors);
    let every = args.string("every", errors);
    let tz = args.string("tz", errors);

    let cron_ok = match &cron {
        Some(lit) => {
            let expr = lit.value();
            match cronguard_schedule::validate_cron(&expr) {
                Ok(()) => true,
                Err(error) => {
                    errors.on(lit, error.message_for(&expr));
                    false
                }
            }
        }
        None => false,
    };
    let tz_ok = match &tz {
        Some(lit) => match cronguard_schedule::parse_time_zone(&lit.value()) {
            Ok(_) => true,
            Err(error) => {
                errors.on(lit, error);
                false
            }
        },
        None => true,
    };
    let every_millis = every
        .as_ref()
        .and_then(|lit| duration_or_report(lit, errors));

    match (args.key("cron"), args.key("every")) {
        (Some(cron_key), Some(every_key)) => {
            // Point at whichever was written second.
            let (second, first, key) = if args.index("cron") > args.index("every") {
                ("cron", "every", cron_key)
            } else {
                ("every", "cron", every_key)
            };
            errors.at(
                key.span(),
                format!(
                    "`{second}` cannot be combined with `{first}`; a job has one schedule: keep `cron = \"...\"` for calendar times or `every = \"...\"` for a fixed interval"
                ),
            );
            None
        }
        (None, None) if !syntax_ok => None,
        (None, None) => {
            errors.at(
                Span::call_site(),
                "missing schedule; add `cron = \"...\"` (for example `cron = \"0 */5 * * * *\"`) or `every = \"...\"` (for example `every = \"30s\"`)",
            );
            None
        }
        (Some(_), None) => (cron_ok && tz_ok)
            .then(|| cron.map(|expr| Schedule::Cron { expr, tz }))
            .flatten(),
        (None, Some(_)) => {
            if let Some(tz_key) = args.key("tz") {
                errors.at(
                    tz_key.span(),
                    "`tz` applies only to `cron`; an `every` interval is counted from the Unix epoch and does not depend on a time zone, so remove `tz`",
                );
                return None;
            }
            every_millis.map(|millis| Schedule::Every { millis })
        }
    }
}

fn check_lock(args: &Args, errors: &mut Errors) -> Option<Guard> {
    let Some(lit) = args.string("lock", errors) else {
        // Absent: local. Present but malformed: already reported.
        return (!args.has("lock")).then_some(Guard::Local);
    };
    match lit.value().as_str() {
        "local" => Some(Guard::Local),
        "file" => Some(Guard::File),
        "redis" => Some(Guard::Redis(lit.span())),
        "postgres" => Some(Guard::Postgres(lit.span())),
        other => {
            if let Some(name) = other.strip_prefix("custom:") {
                let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
                if !name.is_empty() && name.chars().all(plain) {
                    return Some(Guard::Custom(name.to_owned()));
                }
                errors.on(
                    &lit,
                    format!("`lock = \"custom:<name>\"` needs the name the guard was registered under with `Builder::custom_guard` after `custom:`, made of ASCII letters, digits, `_`, `-` and `.`; `{name}` is not such a name"),
                );
                return None;
            }
            let hint = did_you_mean(other, &choices("lock"));
            errors.on(
                &lit,
                format!(
                    "unknown lock `{other}`;{hint} expected one of: `local` (in this process), `file` (all processes on this host), `redis` or `postgres` (all replicas of a cluster), or `custom:<name>` (a guard registered with `Builder::custom_guard`)"
                ),
            );
            None
        }
    }
}

fn check_history(args: &Args, guard: Option<&Guard>, errors: &mut Errors) -> Option<bool> {
    let history = args.flag("history", errors);
    if let (true, Some(key), Some(guard)) = (history, args.key("history"), guard) {
        if !matches!(guard, Guard::Postgres(_) | Guard::Custom(_)) {
            errors.at(
                key.span(),
                format!(
                    "`history` needs a guard that keeps run history: `lock = \"postgres\"` or a custom guard, not `lock = \"{}\"`; remove `history` or change the lock",
                    guard.name()
                ),
            );
            return None;
        }
    }
    Some(history)
}

fn check_lease(args: &Args, guard: Option<&Guard>, errors: &mut Errors) -> Option<u64> {
    let lease = args.string("lease", errors);
    let millis = match &lease {
        Some(lit) => duration_or_report(lit, errors),
        None if args.has("lease") => None,
        None => Some(DEFAULT_LEASE_MILLIS),
    };
    if let (Some(key), Some(guard)) = (args.key("lease"), guard) {
        if guard.has_lease() {
            return lease_in_range(lease.as_ref(), millis, errors);
        }
        let name = guard.name();
        let how = if args.has("lock") {
            format!("a `{name}` guard holds no lease")
        } else {
            "the default guard is `lock = \"local\"`, which holds no lease".to_owned()
        };
        errors.at(
            key.span(),
            format!(
                "`lease` applies only to guards with leases (`lock = \"redis\"`, `\"postgres\"` or `\"custom:<name>\"`); {how}, so remove `lease` or change the lock"
            ),
        );
        return None;
    }
    lease_in_range(lease.as_ref(), millis, errors)
}

/// `millis` when the written lease lies within the limits shared with the runtime
/// (`cronguard_schedule::MIN_LEASE` to `MAX_LEASE`); otherwise an error on the literal.
fn lease_in_range(lease: Option<&LitStr>, millis: Option<u64>, errors: &mut Errors) -> Option<u64> {
    let (Some(lit), Some(ms)) = (lease, millis) else {
        return millis;
    };
    match cronguard_schedule::check_lease(std::time::Duration::from_millis(ms)) {
        Ok(()) => Some(ms),
        Err(range) => {
            errors.on(lit, format!("`lease = \"{}\"` {range}", lit.value()));
            None
        }
    }
}

/// `timeout`, `retries`, `backoff` and `jitter`, within the ranges shared with the runtime.
fn check_limits(args: &Args, errors: &mut Errors) -> Option<Limits> {
    use cronguard_schedule::{check_backoff, check_jitter, check_timeout};
    let timeout_millis = limit_duration(args, "timeout", check_timeout, errors);
    let backoff_millis = limit_duration(args, "backoff", check_backoff, errors);
    let jitter_millis = limit_duration(args, "jitter", check_jitter, errors);
    let standby_millis = check_standby_arg(args, errors);
    let retries = check_retries(args, errors);
    if let (Some(key), Some(0)) = (args.key("backoff"), retries) {
        errors.at(
            key.span(),
            "`backoff` is the pause between retries, but this job has no `retries`; add `retries = N` (for example `retries = 3`) or remove `backoff`",
        );
        return None;
    }
    Some(Limits {
        timeout_millis: timeout_millis?,
        retries: retries?,
        backoff_millis: backoff_millis?,
        jitter_millis: jitter_millis?,
        standby_millis: standby_millis?,
    })
}

/// A `jitter` at least as long as the shortest gap between two fires of the schedule
/// (`Schedule::shortest_gap`, the rule the runtime applies to jobs from code and configuration):
/// a fire could then start after the next one is due.
fn check_jitter_gap(args: &Args, schedule: &Schedule, limits: &Limits, errors: &mut Errors) {
    let Some(arg) = args.get("jitter").filter(|_| limits.jitter_millis > 0) else {
        return;
    };
    let built = match schedule {
        Schedule::Cron { expr, tz } => {
            let tz = tz.as_ref().map_or_else(|| "UTC".to_owned(), LitStr::value);
            cronguard_schedule::Schedule::cron(&expr.value(), &tz)
        }
        Schedule::Every { millis } => {
            cronguard_schedule::Schedule::every(std::time::Duration::from_millis(*millis))
        }
    };
    // Checked above; a schedule that does not build has been reported there.
    let Ok(schedule) = built else {
        return;
    };
    let jitter = std::time::Duration::from_millis(limits.jitter_millis);
    if let (Err(gap), Value::Lit(Lit::Str(lit))) = (
        cronguard_schedule::check_jitter_for(jitter, &schedule),
        &arg.value,
    ) {
        errors.on(lit, format!("`jitter = \"{}\"` {gap}", lit.value()));
    }
}

/// `standby`: `Some(None)` when not given, `None` (reported) when wrong. Zero is a value here:
/// every process claims at once.
fn check_standby_arg(args: &Args, errors: &mut Errors) -> Option<Option<u64>> {
    let Some(lit) = args.string("standby", errors) else {
        return (!args.has("standby")).then_some(None);
    };
    let standby = match cronguard_schedule::parse_duration_millis_or_zero(&lit.value()) {
        Ok(standby) => standby,
        Err(e) => {
            errors.on(&lit, e.to_string());
            return None;
        }
    };
    if let Err(range) = cronguard_schedule::check_standby(standby) {
        errors.on(&lit, format!("`standby = \"{}\"` {range}", lit.value()));
        return None;
    }
    Some(Some(u64::try_from(standby.as_millis()).unwrap_or(u64::MAX)))
}

/// A duration limit in milliseconds (0 when not given), checked against its shared range.
fn limit_duration(
    args: &Args,
    key: &str,
    check: fn(std::time::Duration) -> Result<(), String>,
    errors: &mut Errors,
) -> Option<u64> {
    let Some(lit) = args.string(key, errors) else {
        return (!args.has(key)).then_some(0);
    };
    let millis = duration_or_report(&lit, errors)?;
    match check(std::time::Duration::from_millis(millis)) {
        Ok(()) => Some(millis),
        Err(range) => {
            errors.on(&lit, format!("`{key} = \"{}\"` {range}", lit.value()));
            None
        }
    }
}

fn check_retries(args: &Args, errors: &mut Errors) -> Option<u32> {
    let Some(value) = args.integer("retries", errors) else {
        return (!args.has("retries")).then_some(0);
    };
    let max = cronguard_schedule::MAX_RETRIES;
    let int = match value {
        Ok(int) => int,
        Err(negative) => {
            errors.on(
                &negative,
                format!("`retries` cannot be negative; give how often a failed run is tried again, from 0 to {max}"),
            );
            return None;
        }
    };
    let count = int.base10_parse::<u32>().ok();
    match count.map(|n| (n, cronguard_schedule::check_retries(n))) {
        Some((n, Ok(()))) => Some(n),
        Some((n, Err(range))) => {
            errors.on(&int, format!("`retries = {n}` {range}"));
            None
        }
        None => {
            errors.on(
                &int,
                format!(
                    "`retries = {}` is too many; give at most {max} retries",
                    int.base10_digits()
                ),
            );
            None
        }
    }
}

fn check_max_instances(args: &Args, guard: Option<&Guard>, errors: &mut Errors) -> Option<u32> {
    let Some(value) = args.integer("max_instances", errors) else {
        return (!args.has("max_instances")).then_some(1);
    };
    let int = match value {
        Ok(int) => int,
        Err(negative) => {
            errors.on(
                &negative,
                "`max_instances` must be at least 1; it is the number of runs of this job allowed at once",
            );
            return None;
        }
    };
    let count = match int.base10_parse::<u32>() {
        Ok(0) => {
            errors.on(
                &int,
                "`max_instances` must be at least 1; it is the number of runs of this job allowed at once",
            );
            return None;
        }
        Ok(count) => count,
        Err(_) => {
            errors.on(
                &int,
                format!(
                    "`max_instances` must be a whole number from 1 to {}",
                    u32::MAX
                ),
            );
            return None;
        }
    };
    if count > 1 {
        let (name, holds) = match guard {
            Some(Guard::File) => ("file", "across all processes of this host"),
            Some(Guard::Redis(_)) => ("redis", "across all replicas of the cluster"),
            Some(Guard::Postgres(_)) => ("postgres", "across all replicas of the cluster"),
            Some(Guard::Custom(_)) => ("custom", "across every process it reaches"),
            Some(Guard::Local) | None => return Some(count),
        };
        errors.on(
            &int,
            format!(
                "`max_instances = {count}` cannot be used with `lock = \"{name}\"`: a `{name}` guard holds one run at a time {holds}; remove `max_instances`, or use `lock = \"local\"` to allow {count} runs at once in this process"
            ),
        );
        return None;
    }
    Some(count)
}

fn check_overlap(args: &Args, errors: &mut Errors) -> Option<Overlap> {
    let Some(lit) = args.string("overlap", errors) else {
        return (!args.has("overlap")).then_some(Overlap::Skip);
    };
    match lit.value().as_str() {
        "skip" => Some(Overlap::Skip),
        "queue" => Some(Overlap::Queue),
        "replace" => Some(Overlap::Replace),
        other => {
            let hint = did_you_mean(other, &choices("overlap"));
            errors.on(
                &lit,
                format!(
                    "unknown overlap policy `{other}`;{hint} expected one of: `skip` (drop the fire), `queue` (wait for a free slot) or `replace` (cancel the oldest running instance)"
                ),
            );
            None
        }
    }
}

/// The job-name rule, shared with the runtime's `Job::new` through `cronguard-schedule`.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    cronguard_schedule::validate_job_name(name)
}

fn check_signature(sig: &syn::Signature, errors: &mut Errors) -> Signature {
    const JOB: &str = "a `#[scheduled]` job";
    if let Some(constness) = &sig.constness {
        errors.on(
            constness,
            format!("{JOB} cannot be a `const fn`; remove `const`"),
        );
    }
    if let Some(unsafety) = &sig.unsafety {
        errors.on(
            unsafety,
            format!("{JOB} cannot be an `unsafe fn`: the scheduler cannot uphold its safety contract; remove `unsafe` and use an `unsafe` block inside the function"),
        );
    }
    if let Some(abi) = &sig.abi {
        errors.on(
            abi,
            format!(
                "{JOB} cannot have an `extern` ABI; remove `{}`",
                abi_text(abi)
            ),
        );
    }
    let generics = &sig.generics;
    if !generics.params.is_empty() {
        let only_lifetimes = generics
            .params
            .iter()
            .all(|param| matches!(param, syn::GenericParam::Lifetime(_)));
        let message = if only_lifetimes {
            format!("{JOB} cannot have lifetime parameters: the scheduler passes it only owned values; remove them")
        } else {
            format!("{JOB} cannot be generic: the scheduler calls it without type arguments; remove the generic parameters")
        };
        errors.on(generics, message);
    } else if let Some(where_clause) = &generics.where_clause {
        errors.on(
            where_clause,
            format!("{JOB} cannot have a `where` clause; remove it"),
        );
    }
    if let Some(variadic) = &sig.variadic {
        errors.on(
            variadic,
            format!("{JOB} cannot be variadic; it takes a `JobContext` or no argument"),
        );
    }

    let mut params = Vec::new();
    let mut context: Option<&Type> = None;
    for input in &sig.inputs {
        let pat_type = match input {
            FnArg::Receiver(receiver) => {
                errors.on(
                    receiver,
                    format!("{JOB} cannot take `self`; make it a free function (outside any `impl` block) that takes a `JobContext`, `State<T>` arguments, or no argument"),
                );
                continue;
            }
            FnArg::Typed(pat_type) => pat_type,
        };
        let ty = &*pat_type.ty;
        match argument_type(ty) {
            ArgumentType::Context if context.is_some() => errors.on(
                ty,
                format!("{JOB} takes at most one `JobContext`; remove this argument (the context is cheap to clone)"),
            ),
            ArgumentType::Context => {
                context = Some(ty);
                params.push(ty.clone());
            }
            ArgumentType::State => params.push(ty.clone()),
            ArgumentType::BorrowedContext => errors.on(
                ty,
                format!("{JOB} takes its `JobContext` by value; write `ctx: JobContext` (it is cheap to clone)"),
            ),
            ArgumentType::BorrowedState => errors.on(
                ty,
                format!("{JOB} takes its `State<T>` by value; write `state: State<T>` (it is an `Arc`, cheap to clone)"),
            ),
            ArgumentType::Other => errors.on(
                ty,
                format!("an argument of {JOB} must be a `JobContext` (fire time, fencing token, cancellation) or a `State<T>` (a value given to `Builder::state`), or the job takes no argument"),
            ),
        }
    }

    let output = match &sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, ty) => {
            if contains_impl(&quote::quote!(#ty)) {
                errors.on(
                    ty,
                    format!("{JOB} cannot return `impl Trait`; return `()` or `Result<(), E>` where `E: Display`, for example `anyhow::Result<()>`"),
                );
            }
            Some((**ty).clone())
        }
    };

    Signature {
        is_async: sig.asyncness.is_some(),
        params,
        output,
    }
}

fn abi_text(abi: &syn::Abi) -> String {
    match &abi.name {
        Some(name) => format!("extern {}", name.token()),
        None => "extern".to_owned(),
    }
}

enum ArgumentType {
    Context,
    State,
    BorrowedContext,
    BorrowedState,
    Other,
}

/// What an argument's type names: `JobContext` (any path whose last segment is `JobContext`, so
/// `cronguard::JobContext` and re-exports work), `State<T>` (last segment `State` with one type
/// argument), or a reference to one of them. The compiler checks that they are the real ones
/// (`FromContext`).
fn argument_type(ty: &Type) -> ArgumentType {
    match ty {
        Type::Group(group) => argument_type(&group.elem),
        Type::Paren(paren) => argument_type(&paren.elem),
        Type::Path(path) if path.qself.is_none() => match path.path.segments.last() {
            Some(last) if last.ident == "JobContext" && last.arguments.is_none() => {
                ArgumentType::Context
            }
            Some(last) if last.ident == "State" => match &last.arguments {
                syn::PathArguments::AngleBracketed(generic)
                    if generic.args.len() == 1
                        && matches!(generic.args.first(), Some(syn::GenericArgument::Type(_))) =>
                {
                    ArgumentType::State
                }
                _ => ArgumentType::Other,
            },
            _ => ArgumentType::Other,
        },
        Type::Reference(reference) => match argument_type(&reference.elem) {
            ArgumentType::Context => ArgumentType::BorrowedContext,
            ArgumentType::State => ArgumentType::BorrowedState,
            _ => ArgumentType::Other,
        },
        _ => ArgumentType::Other,
    }
}

/// Whether a type contains `impl Trait` anywhere (`Result<(), impl Display>` included).
fn contains_impl(tokens: &TokenStream) -> bool {
    tokens.clone().into_iter().any(|token| match token {
        TokenTree::Ident(ident) => ident == "impl",
        TokenTree::Group(group) => contains_impl(&group.stream()),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;
    use syn::parse_quote;

    fn job(args: TokenStream, func: ItemFn) -> Result<Job, Vec<String>> {
        check(args, &func).map_err(|e| e.into_iter().map(|e| e.to_string()).collect())
    }

    fn errors(args: TokenStream, func: ItemFn) -> Vec<String> {
        match job(args, func) {
            Ok(_) => panic!("expected errors"),
            Err(errors) => errors,
        }
    }

    fn plain() -> ItemFn {
        parse_quote!(
            async fn tick(ctx: JobContext) {}
        )
    }

    #[test]
    fn accepts_every_argument() {
        let job = job(
            quote!(
                cron = "0 */5 * * * *",
                tz = "Europe/Berlin",
                lock = "redis",
                lease = "10s",
                max_instances = 1,
                overlap = "queue",
                coalesce,
                misfire_grace = "2m",
                name = "billing::settle"
            ),
            parse_quote!(
                fn settle(_ctx: cronguard::JobContext) -> anyhow::Result<()> {
                    Ok(())
                }
            ),
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert!(
            matches!(job.schedule, Schedule::Cron { ref expr, tz: Some(ref tz) }
            if expr.value() == "0 */5 * * * *" && tz.value() == "Europe/Berlin")
        );
        assert!(matches!(job.guard, Guard::Redis(_)));
        assert_eq!(job.lease_millis, 10_000);
        assert_eq!(job.max_instances, 1);
        assert_eq!(job.overlap, Overlap::Queue);
        assert!(job.coalesce);
        assert_eq!(job.misfire_grace_millis, 120_000);
        assert_eq!(
            job.name.map(|n| n.value()).as_deref(),
            Some("billing::settle")
        );
        assert!(!job.signature.is_async);
        assert_eq!(job.signature.params.len(), 1);
        assert!(job.signature.output.is_some());
    }

    #[test]
    fn applies_defaults() {
        let job = job(
            quote!(every = "30s"),
            parse_quote!(
                async fn tick() {}
            ),
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert!(matches!(job.schedule, Schedule::Every { millis: 30_000 }));
        assert!(matches!(job.guard, Guard::Local));
        assert_eq!(job.lease_millis, DEFAULT_LEASE_MILLIS);
        assert_eq!(job.max_instances, 1);
        assert_eq!(job.overlap, Overlap::Skip);
        assert!(!job.coalesce);
        assert_eq!(job.misfire_grace_millis, DEFAULT_MISFIRE_GRACE_MILLIS);
        assert!(job.name.is_none());
        assert!(job.signature.is_async);
        assert!(job.signature.params.is_empty());
        assert!(job.signature.output.is_none());
    }

    #[test]
    fn reports_unknown_arguments_with_a_suggestion() {
        let errors = errors(quote!(every = "1s", leese = "10s"), plain());
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].starts_with(
                "unknown argument `leese`; did you mean `lease`? expected one of: `cron`, `every`"
            ),
            "{}",
            errors[0]
        );
        let errors = errors_of(quote!(every = "1s", banana = 1));
        assert!(
            errors[0].starts_with("unknown argument `banana`; expected one of:"),
            "{}",
            errors[0]
        );
    }

    fn errors_of(args: TokenStream) -> Vec<String> {
        errors(args, plain())
    }

    #[test]
    fn reports_argument_mistakes() {
        let cases: &[(TokenStream, &str)] = &[
            (
                quote!(every = "1s", every = "2s"),
                "duplicate argument `every`",
            ),
            (
                quote!(every = "1s", coalesce = true),
                "`coalesce` is a flag and takes no value; write `coalesce`",
            ),
            (
                quote!(cron),
                "`cron` needs a value; write `cron = \"0 */5 * * * *\"`",
            ),
            (
                quote!(every = "1s", lock =),
                "`lock` needs a value; write `lock = \"local\"`",
            ),
            (
                quote!(every = "1s", max_instances = "2"),
                "`max_instances` takes an integer literal, not a string; write `max_instances = 2`",
            ),
            (
                quote!(every = 30),
                "`every` takes a string literal with a unit; write `every = \"30s\"`",
            ),
            (
                quote!(every = "1s", lock = redis),
                "`lock` takes a string literal; write `lock = \"redis\"`",
            ),
            (
                quote!(every = INTERVAL.x),
                "`every` takes a string literal such as",
            ),
            (quote!(lock = "file"), "missing schedule"),
            (
                quote!(cron = "* * * * *", every = "1s"),
                "`every` cannot be combined with `cron`",
            ),
            (
                quote!(every = "1s", tz = "UTC"),
                "`tz` applies only to `cron`",
            ),
            (
                quote!(cron = "* * * * * * * *"),
                "invalid cron expression `* * * * * * * *`: ",
            ),
            // The messages of these three come from `cronguard-schedule`.
            (quote!(cron = "* * * * *", tz = "Mars/Olympus"), ""),
            (quote!(every = "soon"), ""),
            (quote!(every = "0s"), ""),
            (
                quote!(every = "1s", lock = "etcd"),
                "unknown lock `etcd`; expected one of: `local`",
            ),
            (
                quote!(every = "1s", lock = "Redis"),
                "unknown lock `Redis`; did you mean `redis`? expected one of:",
            ),
            (
                quote!(every = "1s", overlap = "drop"),
                "unknown overlap policy `drop`; expected one of: `skip`",
            ),
            (
                quote!(every = "1s", lease = "5s"),
                "`lease` applies only to guards with leases (`lock = \"redis\"`, `\"postgres\"` or `\"custom:<name>\"`); the default guard is `lock = \"local\"`",
            ),
            (
                quote!(every = "1s", lock = "file", lease = "5s"),
                "`lease` applies only to guards with leases (`lock = \"redis\"`, `\"postgres\"` or `\"custom:<name>\"`); a `file` guard holds no lease",
            ),
            (
                quote!(every = "1s", lock = "redis", lease = "50ms"),
                "`lease = \"50ms\"` is out of range; give a lease from 100ms to 24h",
            ),
            (
                quote!(every = "1s", lock = "redis", lease = "25h"),
                "`lease = \"25h\"` is out of range; give a lease from 100ms to 24h",
            ),
            (
                quote!(every = "1s", max_instances = 0),
                "`max_instances` must be at least 1",
            ),
            (
                quote!(every = "1s", max_instances = -3),
                "`max_instances` must be at least 1",
            ),
            (
                quote!(every = "1s", max_instances = 99999999999),
                "`max_instances` must be a whole number from 1 to",
            ),
            (
                quote!(every = "1s", lock = "file", max_instances = 2),
                "`max_instances = 2` cannot be used with `lock = \"file\"`",
            ),
            (
                quote!(every = "1s", lock = "redis", max_instances = 3),
                "`max_instances = 3` cannot be used with `lock = \"redis\"`",
            ),
            (quote!(every = "1s", name = ""), "the job name is empty"),
            (
                quote!(every = "1s", name = "a b"),
                "invalid job name `a b`: it contains whitespace",
            ),
        ];
        for (args, expected) in cases {
            let errors = errors_of(args.clone());
            assert_eq!(errors.len(), 1, "{args}: {errors:?}");
            assert!(
                errors[0].starts_with(expected),
                "{args}: {:?} does not start with {expected:?}",
                errors[0]
            );
        }
    }

    #[test]
    fn reports_every_mistake_at_once() {
        let errors = errors(
            quote!(
                cron = "nope",
                tz = "Nowhere",
                lease = "10s",
                overlap = "drop",
                coalesce = 1
            ),
            parse_quote!(
                const fn tick<T>(a: u32, b: u32) -> impl Sized {}
            ),
        );
        assert_eq!(errors.len(), 10, "{errors:#?}");
    }

    #[test]
    fn names() {
        assert!(check_name("billing::settle_orders-v2.1").is_ok());
        assert!(check_name("a/b").is_err());
        assert!(check_name("{job}").is_err());
        let control = check_name("a\u{7}b").expect_err("a control character");
        assert!(
            control.contains("the control character `\\u{7}`"),
            "{control}"
        );
        assert!(check_name("naïve").is_err());
    }

    #[test]
    fn reports_signature_mistakes() {
        let args = quote!(every = "1s");
        let cases: Vec<(ItemFn, &str)> = vec![
            (
                parse_quote!(
                    fn f<T>() {}
                ),
                "a `#[scheduled]` job cannot be generic",
            ),
            (
                parse_quote!(
                    fn f<'a>() {}
                ),
                "a `#[scheduled]` job cannot have lifetime parameters",
            ),
            (
                parse_quote!(
                    fn f()
                    where
                        u8: Copy,
                    {
                    }
                ),
                "a `#[scheduled]` job cannot have a `where` clause",
            ),
            (
                parse_quote!(
                    fn f(&self) {}
                ),
                "a `#[scheduled]` job cannot take `self`",
            ),
            (
                parse_quote!(
                    const fn f() {}
                ),
                "a `#[scheduled]` job cannot be a `const fn`",
            ),
            (
                parse_quote!(
                    unsafe fn f() {}
                ),
                "a `#[scheduled]` job cannot be an `unsafe fn`",
            ),
            (
                parse_quote!(
                    extern "C" fn f() {}
                ),
                "a `#[scheduled]` job cannot have an `extern` ABI; remove `extern \"C\"`",
            ),
            (
                parse_quote!(
                    fn f(a: JobContext, b: u8) {}
                ),
                "an argument of a `#[scheduled]` job must be a `JobContext`",
            ),
            (
                parse_quote!(
                    fn f(a: u8) {}
                ),
                "an argument of a `#[scheduled]` job must be a `JobContext`",
            ),
            (
                parse_quote!(
                    fn f(a: JobContext, b: cronguard::JobContext) {}
                ),
                "a `#[scheduled]` job takes at most one `JobContext`",
            ),
            (
                parse_quote!(
                    fn f(a: &State<Db>) {}
                ),
                "a `#[scheduled]` job takes its `State<T>` by value",
            ),
            (
                parse_quote!(
                    fn f(a: State) {}
                ),
                "an argument of a `#[scheduled]` job must be a `JobContext`",
            ),
            (
                parse_quote!(
                    fn f(a: &JobContext) {}
                ),
                "a `#[scheduled]` job takes its `JobContext` by value",
            ),
            (
                parse_quote!(
                    fn f(a: JobContext<u8>) {}
                ),
                "an argument of a `#[scheduled]` job must be a `JobContext`",
            ),
            (
                parse_quote!(
                    fn f() -> impl Sized {}
                ),
                "a `#[scheduled]` job cannot return `impl Trait`",
            ),
            (
                parse_quote!(
                    fn f() -> Result<(), impl std::fmt::Display> {
                        Ok(())
                    }
                ),
                "a `#[scheduled]` job cannot return `impl Trait`",
            ),
        ];
        for (func, expected) in cases {
            let errors = errors(args.clone(), func.clone());
            assert_eq!(errors.len(), 1, "{}: {errors:?}", quote!(#func));
            assert!(
                errors[0].starts_with(expected),
                "{:?} does not start with {expected:?}",
                errors[0]
            );
        }
    }

    #[test]
    fn accepts_any_pattern_for_the_context() {
        for func in [
            parse_quote!(
                fn f(ctx: JobContext) {}
            ),
            parse_quote!(
                fn f(_ctx: JobContext) {}
            ),
            parse_quote!(
                fn f(_: JobContext) {}
            ),
            parse_quote!(
                fn f(mut ctx: JobContext) {}
            ),
            parse_quote!(
                fn f(ctx: ::cronguard::JobContext) {}
            ),
        ] {
            let job = job(quote!(every = "1s"), func).unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!(job.signature.params.len(), 1);
        }
    }

    #[test]
    fn accepts_state_arguments_in_any_order() {
        let job = job(
            quote!(every = "1s"),
            parse_quote!(
                async fn f(db: State<Db>, ctx: JobContext, cfg: cronguard::State<app::Config>) {}
            ),
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        let params: Vec<String> = job
            .signature
            .params
            .iter()
            .map(|ty| quote!(#ty).to_string())
            .collect();
        assert_eq!(
            params,
            [
                "State < Db >",
                "JobContext",
                "cronguard :: State < app :: Config >"
            ]
        );
    }

    #[test]
    fn reads_the_crate_path() {
        let job = job(
            quote!(every = "1s", crate = "my_framework::cronguard"),
            plain(),
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        let krate = job.krate.expect("a path");
        assert_eq!(quote!(#krate).to_string(), "my_framework :: cronguard");
        for bad in ["", "my framework", "a::<u8>", "1a"] {
            let errors = errors(quote!(every = "1s", crate = #bad), plain());
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert!(
                errors[0].starts_with("`crate` takes the path of the cronguard crate"),
                "{bad}: {errors:?}"
            );
        }
    }

    #[test]
    fn a_standby_of_zero_is_a_value_not_a_mistake() {
        let zero =
            job(quote!(every = "1s", standby = "0s"), plain()).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(zero.limits.standby_millis, Some(0));
        assert_eq!(job_of_every().limits.standby_millis, None, "not given");
    }

    #[test]
    fn reads_the_limits() {
        let job = job(
            quote!(
                every = "1m",
                timeout = "5m",
                retries = 3,
                backoff = "10s",
                jitter = "30s",
                standby = "2s"
            ),
            plain(),
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            job.limits,
            Limits {
                timeout_millis: 300_000,
                retries: 3,
                backoff_millis: 10_000,
                jitter_millis: 30_000,
                standby_millis: Some(2_000),
            }
        );
        let none = job_of_every();
        assert_eq!(none.limits, Limits::default());
    }

    fn job_of_every() -> Job {
        job(quote!(every = "1s"), plain()).unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn rejects_limits_out_of_range() {
        let cases: &[(TokenStream, &str)] = &[
            (
                quote!(every = "1s", backoff = "10s"),
                "`backoff` is the pause between retries, but this job has no `retries`",
            ),
            (
                quote!(every = "1s", retries = 101),
                "`retries = 101` is too many; give at most 100 retries",
            ),
            (
                quote!(every = "1s", retries = -1),
                "`retries` cannot be negative",
            ),
            (
                quote!(every = "1s", retries = 99999999999),
                "`retries = 99999999999` is too many",
            ),
            (
                quote!(every = "1s", retries = 2, backoff = "2h"),
                "`backoff = \"2h\"` is out of range; give a duration from 1ms to 1h",
            ),
            (
                quote!(every = "1s", timeout = "8d"),
                "`timeout = \"8d\"` is out of range; give a duration from 1ms to 7d",
            ),
            (
                quote!(every = "1s", jitter = "25h"),
                "`jitter = \"25h\"` is out of range; give a duration from 1ms to 24h",
            ),
            (quote!(every = "1s", jitter = "0s"), "is zero"),
            (
                quote!(every = "30s", jitter = "30s"),
                "`jitter = \"30s\"` is not shorter than the shortest gap between two fires of the schedule (30s)",
            ),
            (
                quote!(cron = "0 8,20 * * *", tz = "Europe/Berlin", jitter = "12h"),
                "give a jitter below 12h",
            ),
            (
                quote!(every = "1s", standby = "2h"),
                "`standby = \"2h\"` is out of range; give a duration from 0s",
            ),
            (quote!(every = "1s", timeout = "soon"), "is not a duration"),
            (
                quote!(every = "1s", timeout = 30),
                "`timeout` takes a string literal with a unit; write `timeout = \"30s\"`",
            ),
        ];
        for (args, expected) in cases {
            let errors = errors_of(args.clone());
            assert_eq!(errors.len(), 1, "{args}: {errors:?}");
            assert!(errors[0].contains(expected), "{args}: {errors:?}");
        }
    }
}
