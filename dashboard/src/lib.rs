//! An HTML dashboard for [`cronguard`], as an [`axum::Router`] a service mounts under a path of
//! its choice: over a running scheduler ([`Dashboard::new`]) or over a shared guard's store
//! ([`Dashboard::for_store`]), the same page on every replica and after a restart.
//!
//! One page lists every job (page by page): its schedule in words, next fire, last run, state
//! (on time, overdue, paused, running) and a strip of its last fires coloured by fate, drawn as
//! inline SVG; and pause, resume and run-now buttons. Over a store, each job also has a page of
//! its own (`jobs/<name>`): its settings, state, run history, controls and the live replicas.
//! Plain HTML, inline CSS and SVG: no JavaScript, no external assets, relative links only (it
//! works under any mount path).
//!
//! The buttons are HTML forms that POST to the dashboard and are answered by a redirect (303) back
//! to the page. Every POST is refused (403) unless the service gave an authorisation check:
//! [`Dashboard::authorize`] guards the buttons only (every reader may see the page), and
//! [`Dashboard::authorize_roles`] (or [`Dashboard::tokens`]) guards the pages as well, with a
//! read-only [`Role::Viewer`] and a [`Role::Operator`] who may press the buttons. A browser's
//! cross-site POST (`Sec-Fetch-Site: cross-site` or `same-site`) is refused before a check is
//! asked.
//!
//! ```no_run
//! # async fn example(handle: &cronguard::Cronguard) {
//! use cronguard_dashboard::{Dashboard, Tokens};
//!
//! // Tokens compared in constant time; shown as `Authorization: Bearer <token>` or as the
//! // password of HTTP Basic authentication (what a browser asks for).
//! let tokens = Tokens::new()
//!     .operator(std::env::var("OPS_TOKEN").unwrap_or_default())
//!     .viewer(std::env::var("OPS_READ_TOKEN").unwrap_or_default());
//! let dashboard = Dashboard::new(handle).tokens(tokens).router();
//! let app: axum::Router = axum::Router::new().nest("/ops", dashboard);
//! # let _ = app;
//! # }
//! ```
//!
//! The page is served at the mount path (`/ops`); its links are relative to it, so a proxy that
//! serves it under another prefix needs no setting.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{FromRequest, OriginalUri, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use cronguard::admin::Store;
use cronguard::{ControlError, Cronguard, Event, Monitor};
use tokio::sync::broadcast::Receiver;

mod auth;
mod page;
mod store;
mod strip;

pub use auth::{Access, Role, Tokens};
pub use axum::http::request::Parts;

use page::Controls;
use strip::Strips;

/// How many fires a job's strip shows, unless set with [`Dashboard::strip_len`].
pub const DEFAULT_STRIP_LEN: usize = 30;
/// How many jobs get a strip, unless set with [`Dashboard::max_tracked_jobs`].
pub const DEFAULT_MAX_TRACKED_JOBS: usize = 10_000;
/// How many jobs a page lists, unless the URL says `?limit=` or it is set with
/// [`Dashboard::page_size`].
pub const DEFAULT_PAGE_SIZE: usize = 100;
/// The most jobs one page lists.
pub const MAX_PAGE_SIZE: usize = 1000;
/// How many history entries a job's page lists, unless the URL says `?limit=` (at most
/// [`MAX_PAGE_SIZE`]).
pub const DEFAULT_HISTORY_ROWS: usize = 100;

type Check = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;
type RoleCheck = Arc<dyn Fn(&Parts) -> Option<Access> + Send + Sync>;

/// What a POST without a configured check is told.
const NOT_CONFIGURED: &str = "The dashboard's controls are off: this service configured no \
authorisation check. Give one with `Dashboard::authorize(|request| ...)` or \
`Dashboard::authorize_roles(...)`: it sees the request's headers (a session cookie, a token) and \
says who is asking, or `None` to refuse.\n";

/// Who may do what.
#[derive(Clone)]
enum Auth {
    /// No check: everyone reads, nobody operates.
    Open,
    /// [`Dashboard::authorize`]: everyone reads; the check decides each POST.
    Writes(Check),
    /// [`Dashboard::authorize_roles`]: the check decides each request, by role.
    Roles(RoleCheck),
}

/// Where the page's jobs come from.
enum Source {
    /// The scheduler of this process, its strips fed from its events.
    Scheduler {
        monitor: Monitor,
        events: Receiver<Event>,
    },
    /// A shared guard's store: the roster, states and history every replica shares.
    Store(Arc<Store>),
}

/// The dashboard of one scheduler or one store, to be turned into a [`Router`] with
/// [`router`](Dashboard::router).
pub struct Dashboard {
    source: Source,
    auth: Auth,
    strip_len: usize,
    max_jobs: usize,
    page_size: usize,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field(
                "source",
                &match &self.source {
                    Source::Scheduler { .. } => "scheduler",
                    Source::Store(_) => "store",
                },
            )
            .field(
                "auth",
                &match self.auth {
                    Auth::Open => "none",
                    Auth::Writes(_) => "controls",
                    Auth::Roles(_) => "roles",
                },
            )
            .field("strip_len", &self.strip_len)
            .field("max_jobs", &self.max_jobs)
            .field("page_size", &self.page_size)
            .finish()
    }
}

impl Dashboard {
    /// The dashboard of `handle`'s scheduler. Its strips show the fires this process sees from
    /// now on (a fire another replica claimed is drawn as "ran elsewhere"); for the strips every
    /// replica shares, build a dashboard over the store with [`Dashboard::for_store`].
    pub fn new(handle: &Cronguard) -> Self {
        Dashboard::with_events(handle.monitor(), handle.monitor().subscribe())
    }

    /// The dashboard of the scheduler behind `monitor`, its strips fed from `events`
    /// ([`Monitor::subscribe`]), for a service that keeps only a [`Monitor`].
    pub fn with_events(monitor: Monitor, events: Receiver<Event>) -> Self {
        Dashboard::of(Source::Scheduler { monitor, events })
    }

    /// The dashboard of a shared guard's store (a lock dir, Redis or PostgreSQL, opened with
    /// [`Store::lock_dir`], [`Store::redis`] or [`Store::postgres`]): every job the replicas
    /// announced, its state as the store tells it, and a strip of its last fires as the store's
    /// history recorded them (where and how each ran) — the same page on every replica and after
    /// a restart. Each job has a page of its own, `jobs/<name>`, with its history and the live
    /// replicas. The buttons act through the store: run now asks only when the store shows a
    /// live replica of the job ([`Store::trigger_if_live`]).
    ///
    /// A page of `n` jobs asks the store at most `3 + 6 n` times (all at the same time, each
    /// within 5 s): the roster's names once, [`Store::jobs_named`] and [`Store::health_of`] for
    /// the page's jobs, and one [`Store::history`] read per job; a job's page `9` times.
    pub fn for_store(store: Store) -> Self {
        Dashboard::of(Source::Store(Arc::new(store)))
    }

    fn of(source: Source) -> Self {
        Dashboard {
            source,
            auth: Auth::Open,
            strip_len: DEFAULT_STRIP_LEN,
            max_jobs: DEFAULT_MAX_TRACKED_JOBS,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }

    /// Turns the controls on: every POST (pause, resume, run now) is carried out only when
    /// `check` returns `Some(who)` for the request (`who` is recorded as who paused a job), and
    /// answered 403 otherwise. Without a check every POST is answered 403. The pages stay open to
    /// every reader; to guard them too, use [`Dashboard::authorize_roles`] instead.
    ///
    /// The check sees the request's method, URI and headers (not its body). A browser's
    /// cross-site POST is refused before it is asked; if the check accepts a cookie, make the
    /// cookie `SameSite=Strict` too, for browsers that do not send `Sec-Fetch-Site`.
    pub fn authorize<F>(mut self, check: F) -> Self
    where
        F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    {
        self.auth = Auth::Writes(Arc::new(check));
        self
    }

    /// Guards the pages as well as the buttons: `check` is asked about every request and
    /// returns who is asking and their [`Role`], or `None` to refuse. A GET that it refuses is
    /// answered 401 (with a `WWW-Authenticate: Basic` challenge, so that a browser asks for a
    /// user name and password) when the request carries no `Authorization` header, and 403
    /// otherwise; a POST needs [`Role::Operator`] (403 otherwise). A viewer sees the buttons
    /// greyed out. Replaces a check given with [`Dashboard::authorize`].
    ///
    /// Compare secrets in constant time ([`Tokens`] does), and see [`Dashboard::authorize`] on
    /// cookies.
    pub fn authorize_roles<F>(mut self, check: F) -> Self
    where
        F: Fn(&Parts) -> Option<Access> + Send + Sync + 'static,
    {
        self.auth = Auth::Roles(Arc::new(check));
        self
    }

    /// [`Dashboard::authorize_roles`] with a check of secret tokens (see [`Tokens`]).
    pub fn tokens(self, tokens: Tokens) -> Self {
        self.authorize_roles(move |request| tokens.check(request))
    }

    /// How many of its last fires each job's strip shows (default [`DEFAULT_STRIP_LEN`], at
    /// least 1, at most 1,000).
    pub fn strip_len(mut self, fires: usize) -> Self {
        self.strip_len = fires.clamp(1, 1000);
        self
    }

    /// How many jobs get a strip (default [`DEFAULT_MAX_TRACKED_JOBS`]); the fires of further
    /// jobs are counted, and the page says how many it could not show. (Over a store every job
    /// of a page gets its strip from the store's history.)
    pub fn max_tracked_jobs(mut self, jobs: usize) -> Self {
        self.max_jobs = jobs;
        self
    }

    /// How many jobs a page lists unless the URL asks for `?limit=` (default
    /// [`DEFAULT_PAGE_SIZE`], 1 to [`MAX_PAGE_SIZE`]).
    pub fn page_size(mut self, jobs: usize) -> Self {
        self.page_size = jobs.clamp(1, MAX_PAGE_SIZE);
        self
    }

    /// The routes: `GET /` (the page), `POST /pause`, `POST /resume` and `POST /run` (form field
    /// `job`), and over a store `GET /jobs/<name>` (a job's page; the name percent-encoded).
    /// Mount it with [`Router::nest`]; the page is at the mount path (`/ops`), or at `/` when
    /// the router is served as it is.
    ///
    /// Over a scheduler, starts the task that feeds the strips (one per dashboard; it ends when
    /// the router is dropped and an event arrives, or when the scheduler's stream closes), so it
    /// must be called within a tokio runtime.
    pub fn router<S>(self) -> Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        let source = match self.source {
            Source::Scheduler { monitor, events } => {
                let strips = Arc::new(Strips::new(self.strip_len, self.max_jobs));
                tokio::spawn(strip::follow(Arc::downgrade(&strips), events));
                Src::Scheduler { monitor, strips }
            }
            Source::Store(store) => Src::Store(store),
        };
        let is_store = matches!(source, Src::Store(_));
        let app = App {
            source,
            auth: self.auth,
            page_size: self.page_size,
            strip_len: self.strip_len,
        };
        let router = Router::new()
            .route("/", get(show))
            .route("/pause", post(pause))
            .route("/resume", post(resume))
            .route("/run", post(run_now));
        let router = if is_store {
            router.route("/jobs/{name}", get(store::job_page))
        } else {
            router
        };
        router.with_state(app)
    }
}

#[derive(Clone)]
enum Src {
    Scheduler {
        monitor: Monitor,
        strips: Arc<Strips>,
    },
    Store(Arc<Store>),
}

#[derive(Clone)]
struct App {
    source: Src,
    auth: Auth,
    page_size: usize,
    strip_len: usize,
}

impl App {
    /// Whether `request` may read the pages, and what its buttons do; the refusal otherwise.
    #[allow(clippy::result_large_err)] // a response, built once per refused request
    fn may_read(&self, request: &Parts) -> Result<Controls, Response> {
        match &self.auth {
            Auth::Open => Ok(Controls::Off),
            Auth::Writes(_) => Ok(Controls::On),
            Auth::Roles(check) => match check(request) {
                Some(Access {
                    role: Role::Operator,
                    ..
                }) => Ok(Controls::On),
                Some(Access {
                    role: Role::Viewer, ..
                }) => Ok(Controls::ReadOnly),
                None => Err(refused_read(&request.headers)),
            },
        }
    }
}

/// The answer to a GET the check refused: 401 with a challenge when it carried no credentials.
fn refused_read(headers: &HeaderMap) -> Response {
    if headers.contains_key(header::AUTHORIZATION) {
        return text(StatusCode::FORBIDDEN, "refused: not authorised\n");
    }
    let mut reply = text(
        StatusCode::UNAUTHORIZED,
        "this dashboard needs credentials: send `Authorization: Bearer <token>`, or the token as \
         the password of HTTP Basic authentication\n",
    );
    reply.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"cronguard dashboard\", charset=\"UTF-8\""),
    );
    reply
}

fn text(code: StatusCode, message: impl Into<String>) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message.into(),
    )
        .into_response()
}

/// An HTML page with the dashboard's headers: no cache, no script, no framing by other sites.
fn html_page(code: StatusCode, html: String) -> Response {
    let mut headers = HeaderMap::new();
    let fixed = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
        // No script, no external asset; forms post to this origin only; framed by it only.
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; \
             frame-ancestors 'self'; base-uri 'none'",
        ),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    (code, headers, html).into_response()
}

/// The `?limit=` of a page: `default` when absent, else 1 to [`MAX_PAGE_SIZE`].
#[allow(clippy::result_large_err)]
fn limit_of(query: &HashMap<String, String>, default: usize) -> Result<usize, Response> {
    match query.get("limit").map(|l| l.parse::<usize>()) {
        None => Ok(default),
        Some(Ok(limit)) if (1..=MAX_PAGE_SIZE).contains(&limit) => Ok(limit),
        Some(_) => Err(text(
            StatusCode::BAD_REQUEST,
            format!("`limit` must be a number from 1 to {MAX_PAGE_SIZE}\n"),
        )),
    }
}

async fn show(
    State(app): State<App>,
    OriginalUri(uri): OriginalUri,
    Query(query): Query<HashMap<String, String>>,
    request: Request,
) -> Response {
    let (parts, _) = request.into_parts();
    let controls = match app.may_read(&parts) {
        Ok(controls) => controls,
        Err(refused) => return refused,
    };
    let here = page::Here::of(uri.path());
    let limit = match limit_of(&query, app.page_size) {
        Ok(limit) => limit,
        Err(bad) => return bad,
    };
    let after = query
        .get("after")
        .map(String::as_str)
        .filter(|a| !a.is_empty());
    let (monitor, strips) = match &app.source {
        Src::Scheduler { monitor, strips } => (monitor, strips),
        Src::Store(store) => {
            return store::show(store, &app, controls, &here, after, limit).await;
        }
    };
    let jobs = monitor.jobs_page(after, limit);
    let names: Vec<&str> = jobs.jobs.iter().map(|j| j.name.as_str()).collect();
    let health = monitor.health_of(&names).await;
    let html = page::render(&page::View {
        jobs: &jobs,
        health: &health,
        strips,
        total: monitor.job_count(),
        after,
        limit,
        default_limit: app.page_size,
        controls,
        here: &here,
    });
    html_page(StatusCode::OK, html)
}

/// The form of every button.
#[derive(serde::Deserialize)]
struct ControlForm {
    job: String,
    /// The page to return to (its `after`).
    #[serde(default)]
    after: String,
    /// The page's `limit`, when the URL gave one.
    #[serde(default)]
    limit: String,
    /// `job` when the button is on the job's own page, to return there.
    #[serde(default)]
    back: String,
}

#[derive(Clone, Copy)]
enum Action {
    Pause,
    Resume,
    Run,
}

async fn pause(State(app): State<App>, request: Request) -> Response {
    control(&app, Action::Pause, request).await
}

async fn resume(State(app): State<App>, request: Request) -> Response {
    control(&app, Action::Resume, request).await
}

async fn run_now(State(app): State<App>, request: Request) -> Response {
    control(&app, Action::Run, request).await
}

/// Whether a browser says the request comes from another site (a forged form).
fn cross_site(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|site| {
            site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site")
        })
}

async fn control(app: &App, action: Action, request: Request) -> Response {
    // Authorisation first: the body of a refused request is not even read.
    if matches!(app.auth, Auth::Open) {
        return text(StatusCode::FORBIDDEN, NOT_CONFIGURED);
    }
    let (parts, body) = request.into_parts();
    let posted_to = parts
        .extensions
        .get::<OriginalUri>()
        .map_or_else(|| parts.uri.path().to_owned(), |o| o.path().to_owned());
    if cross_site(&parts.headers) {
        return text(
            StatusCode::FORBIDDEN,
            "refused: the request comes from another site (Sec-Fetch-Site)\n",
        );
    }
    let who =
        match &app.auth {
            Auth::Open => None,
            Auth::Writes(check) => check(&parts),
            Auth::Roles(check) => match check(&parts) {
                Some(Access {
                    role: Role::Operator,
                    who,
                }) => Some(who),
                Some(Access {
                    role: Role::Viewer, ..
                }) => return text(
                    StatusCode::FORBIDDEN,
                    "refused: read-only access; pause, resume and run now need the operator role\n",
                ),
                None => None,
            },
        };
    let Some(who) = who else {
        return text(StatusCode::FORBIDDEN, "refused: not authorised\n");
    };
    let form = match Form::<ControlForm>::from_request(Request::from_parts(parts, body), &()).await
    {
        Ok(Form(form)) => form,
        Err(rejection) => return rejection.into_response(),
    };
    let job = form.job.as_str();
    let here = page::Here::back_from(&posted_to);
    let back = if form.back == "job" {
        page::Here::job_from_action(job)
    } else {
        here.link(
            Some(form.after.as_str()).filter(|a| !a.is_empty()),
            form.limit.parse().ok(),
        )
    };
    let failed = match &app.source {
        Src::Scheduler { monitor, .. } => {
            let done = match action {
                Action::Pause => monitor.pause(job, &who).await,
                Action::Resume => monitor.resume(job, &who).await,
                Action::Run => monitor.trigger(job).map(|_key| ()),
            };
            done.err().map(scheduler_refusal)
        }
        Src::Store(store) => store::act(store, action, job, &who)
            .await
            .err()
            .map(|e| store::refusal(&e, &back)),
    };
    if let Some(refusal) = failed {
        return refusal;
    }
    match HeaderValue::from_str(&back) {
        Ok(location) => (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response(),
        Err(_) => text(StatusCode::OK, "done\n"),
    }
}

/// The answer to a control the scheduler refused.
fn scheduler_refusal(e: ControlError) -> Response {
    match e {
        e @ ControlError::UnknownJob(_) => text(StatusCode::NOT_FOUND, format!("{e}\n")),
        e @ (ControlError::Unsupported(_) | ControlError::InvalidJob { .. }) => {
            text(StatusCode::CONFLICT, format!("{e}\n"))
        }
        e => text(StatusCode::SERVICE_UNAVAILABLE, format!("{}\n", chain(&e))),
    }
}

/// `e` with its causes, `outer: cause: root cause`.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
