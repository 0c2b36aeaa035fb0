//! An HTML dashboard for a running [`cronguard`] scheduler, as an [`axum::Router`] a service
//! mounts under a path of its choice.
//!
//! One page lists every job (page by page): its schedule in words, next fire, last run, state
//! (on time, overdue, paused, running) and a strip of its last fires coloured by fate, drawn as
//! inline SVG; and pause, resume and run-now buttons. Plain HTML, inline CSS and SVG: no
//! JavaScript, no external assets, relative links only (it works under any mount path).
//!
//! The buttons are HTML forms that POST to the dashboard and are answered by a redirect (303) back
//! to the page. Every POST is refused (403) unless the service gave an authorisation check with
//! [`Dashboard::authorize`]; the check sees the request's method, URI and headers and returns who
//! is asking (recorded as who paused a job) or `None` to refuse. A browser's cross-site POST
//! (`Sec-Fetch-Site: cross-site` or `same-site`) is refused before the check is asked.
//!
//! ```no_run
//! # async fn example(handle: &cronguard::Cronguard) {
//! use cronguard_dashboard::Dashboard;
//!
//! let dashboard = Dashboard::new(handle)
//!     .authorize(|request| {
//!         let token = request.headers.get("x-ops-token")?.to_str().ok()?;
//!         (token == "let-me-in").then(|| "ops".to_owned())
//!     })
//!     .router();
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
use cronguard::{ControlError, Cronguard, Event, Monitor};
use tokio::sync::broadcast::Receiver;

mod page;
mod strip;

pub use axum::http::request::Parts;

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

type Check = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

/// What a POST without a configured check is told.
const NOT_CONFIGURED: &str = "The dashboard's controls are off: this service configured no \
authorisation check. Give one with `Dashboard::authorize(|request| ...)`: it sees the request's \
headers (a session cookie, a token) and returns who is asking, or `None` to refuse.\n";

/// The dashboard of one scheduler, to be turned into a [`Router`] with
/// [`router`](Dashboard::router).
pub struct Dashboard {
    monitor: Monitor,
    events: Receiver<Event>,
    authorize: Option<Check>,
    strip_len: usize,
    max_jobs: usize,
    page_size: usize,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("controls", &self.authorize.is_some())
            .field("strip_len", &self.strip_len)
            .field("max_jobs", &self.max_jobs)
            .field("page_size", &self.page_size)
            .finish()
    }
}

impl Dashboard {
    /// The dashboard of `handle`'s scheduler. Its strips show the fires from now on.
    pub fn new(handle: &Cronguard) -> Self {
        Dashboard::with_events(handle.monitor(), handle.monitor().subscribe())
    }

    /// The dashboard of the scheduler behind `monitor`, its strips fed from `events`
    /// ([`Monitor::subscribe`]), for a service that keeps only a [`Monitor`].
    pub fn with_events(monitor: Monitor, events: Receiver<Event>) -> Self {
        Dashboard {
            monitor,
            events,
            authorize: None,
            strip_len: DEFAULT_STRIP_LEN,
            max_jobs: DEFAULT_MAX_TRACKED_JOBS,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }

    /// Turns the controls on: every POST (pause, resume, run now) is carried out only when
    /// `check` returns `Some(who)` for the request (`who` is recorded as who paused a job), and
    /// answered 403 otherwise. Without a check every POST is answered 403.
    ///
    /// The check sees the request's method, URI and headers (not its body). A browser's
    /// cross-site POST is refused before it is asked; if the check accepts a cookie, make the
    /// cookie `SameSite=Strict` too, for browsers that do not send `Sec-Fetch-Site`.
    pub fn authorize<F>(mut self, check: F) -> Self
    where
        F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    {
        self.authorize = Some(Arc::new(check));
        self
    }

    /// How many of its last fires each job's strip shows (default [`DEFAULT_STRIP_LEN`], at
    /// least 1).
    pub fn strip_len(mut self, fires: usize) -> Self {
        self.strip_len = fires.max(1);
        self
    }

    /// How many jobs get a strip (default [`DEFAULT_MAX_TRACKED_JOBS`]); the fires of further
    /// jobs are counted, and the page says how many it could not show.
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
    /// `job`). Mount it with [`Router::nest`]; the page is at the mount path (`/ops`), or at `/`
    /// when the router is served as it is.
    ///
    /// Starts the task that feeds the strips (one per dashboard; it ends when the router is
    /// dropped and an event arrives, or when the scheduler's stream closes), so it must be called
    /// within a tokio runtime.
    pub fn router<S>(self) -> Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        let strips = Arc::new(Strips::new(self.strip_len, self.max_jobs));
        tokio::spawn(strip::follow(Arc::downgrade(&strips), self.events));
        let app = App {
            monitor: self.monitor,
            strips,
            authorize: self.authorize,
            page_size: self.page_size,
        };
        Router::new()
            .route("/", get(show))
            .route("/pause", post(pause))
            .route("/resume", post(resume))
            .route("/run", post(run_now))
            .with_state(app)
    }
}

#[derive(Clone)]
struct App {
    monitor: Monitor,
    strips: Arc<Strips>,
    authorize: Option<Check>,
    page_size: usize,
}

fn text(code: StatusCode, message: impl Into<String>) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message.into(),
    )
        .into_response()
}

async fn show(
    State(app): State<App>,
    OriginalUri(uri): OriginalUri,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let here = page::Here::of(uri.path());
    let limit = match query.get("limit").map(|l| l.parse::<usize>()) {
        None => app.page_size,
        Some(Ok(limit)) if (1..=MAX_PAGE_SIZE).contains(&limit) => limit,
        Some(_) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("`limit` must be a number from 1 to {MAX_PAGE_SIZE}\n"),
            )
        }
    };
    let after = query
        .get("after")
        .map(String::as_str)
        .filter(|a| !a.is_empty());
    let jobs = app.monitor.jobs_page(after, limit);
    let names: Vec<&str> = jobs.jobs.iter().map(|j| j.name.as_str()).collect();
    let health = app.monitor.health_of(&names).await;
    let html = page::render(&page::View {
        jobs: &jobs,
        health: &health,
        strips: &app.strips,
        total: app.monitor.job_count(),
        after,
        limit,
        default_limit: app.page_size,
        controls: app.authorize.is_some(),
        here: &here,
    });
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
    (headers, html).into_response()
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
    let Some(check) = &app.authorize else {
        return text(StatusCode::FORBIDDEN, NOT_CONFIGURED);
    };
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
    let Some(who) = check(&parts) else {
        return text(StatusCode::FORBIDDEN, "refused: not authorised\n");
    };
    let form = match Form::<ControlForm>::from_request(Request::from_parts(parts, body), &()).await
    {
        Ok(Form(form)) => form,
        Err(rejection) => return rejection.into_response(),
    };
    let job = form.job.as_str();
    let done = match action {
        Action::Pause => app.monitor.pause(job, &who).await,
        Action::Resume => app.monitor.resume(job, &who).await,
        Action::Run => app.monitor.trigger(job).map(|_key| ()),
    };
    match done {
        Ok(()) => {
            let back = page::Here::back_from(&posted_to).link(
                Some(form.after.as_str()).filter(|a| !a.is_empty()),
                form.limit.parse().ok(),
            );
            match HeaderValue::from_str(&back) {
                Ok(location) => {
                    (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
                }
                Err(_) => text(StatusCode::OK, "done\n"),
            }
        }
        Err(e @ ControlError::UnknownJob(_)) => text(StatusCode::NOT_FOUND, format!("{e}\n")),
        Err(e @ (ControlError::Unsupported(_) | ControlError::InvalidJob { .. })) => {
            text(StatusCode::CONFLICT, format!("{e}\n"))
        }
        Err(e) => {
            let message = match std::error::Error::source(&e) {
                Some(source) => format!("{e}: {source}\n"),
                None => format!("{e}\n"),
            };
            text(StatusCode::SERVICE_UNAVAILABLE, message)
        }
    }
}
