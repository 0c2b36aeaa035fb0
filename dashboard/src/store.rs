//! The dashboard over a shared guard's store: the roster's jobs page by page with their strips
//! drawn from the store's history, each job's own page, and the buttons acting through the
//! store. Every text from the store is user data and is escaped.
//!
//! What one page asks the store, all at the same time: the roster's names once
//! ([`Store::job_names`]), [`Store::jobs_named`] and [`Store::health_of`] for the page's jobs
//! (one roster read each, then 2 and 3 requests per job), and one [`Store::history`] read per
//! job (plus a roster read when it is empty): at most `3 + 7 n` requests for `n` jobs.

use std::collections::HashMap;
use std::fmt::Write as _;

use axum::extract::{OriginalUri, Path, Query, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, TimeDelta, Utc};
use cronguard::admin::{
    AdminError, JobLiveness, Liveness, Store, StoreHealth, StoreProcess, StoredJob,
    StoredJobHealth, StoredJobState,
};
use cronguard::history::HistoryEntry;
use cronguard::Schedule;

use crate::page::{escape, legend, strip_svg, when, Controls, Here, STYLE};
use crate::strip::{time, Fate, Mark};
use crate::{chain, html_page, limit_of, text, Action, App, DEFAULT_HISTORY_ROWS};

/// The page's `<head>` and title.
fn head(html: &mut String, title: &str) {
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"refresh\" content=\"30\">\
         <title>{title}</title><style>{STYLE}</style></head><body>\n"
    );
}

/// The answer when the store cannot be read.
fn unavailable(e: &AdminError) -> Response {
    text(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "the dashboard cannot read the store: {}\nReload the page once the store answers.\n",
            chain(e)
        ),
    )
}

/// From which fire on a job's strip is read: far enough back for `fires` fires of its schedule
/// (a day when the schedule cannot be read by this version), so that one read brings the strip
/// and little more.
fn strip_since(job: &StoredJob, fires: usize, now: DateTime<Utc>) -> DateTime<Utc> {
    let day = now - TimeDelta::days(1);
    let Ok(schedule) = job.schedule.parse::<Schedule>() else {
        return day;
    };
    let mut at = now;
    for _ in 0..fires {
        match schedule.previous_before(at) {
            Some(t) => at = t,
            None => break,
        }
    }
    // A little earlier still, for fires recorded a moment before their schedule's time.
    at - TimeDelta::seconds(1)
}

/// A job's strip: its marks, or why the store has none.
enum Strip {
    Marks(Vec<Mark>),
    NoHistory,
    Failed(String),
}

/// The main page over the store.
pub(crate) async fn show(
    store: &Store,
    app: &App,
    controls: Controls,
    here: &Here,
    after: Option<&str>,
    limit: usize,
) -> Response {
    let names = match store.job_names().await {
        Ok(names) => names,
        Err(e) => return unavailable(&e),
    };
    let start = after.map_or(0, |a| names.partition_point(|n| n.as_str() <= a));
    let page: Vec<&str> = names[start..]
        .iter()
        .take(limit)
        .map(String::as_str)
        .collect();
    let next = page
        .last()
        .filter(|_| start + page.len() < names.len())
        .copied();
    let (jobs, health) = tokio::join!(store.jobs_named(&page), store.health_of(&page));
    let jobs = match jobs {
        Ok(jobs) => jobs,
        Err(e) => return unavailable(&e),
    };
    let health = health.ok();
    let now = Utc::now();
    let strips = futures_util::future::join_all(jobs.iter().map(|job| async move {
        match store
            .history(&job.name, strip_since(job, app.strip_len, now))
            .await
        {
            Ok(entries) => {
                let skip = entries.len().saturating_sub(app.strip_len);
                Strip::Marks(entries[skip..].iter().map(Mark::of_entry).collect())
            }
            Err(AdminError::NoHistory(_)) => Strip::NoHistory,
            Err(AdminError::UnknownJob(_)) => Strip::Marks(Vec::new()),
            Err(e) => Strip::Failed(chain(&e)),
        }
    }))
    .await;

    let mut html = String::with_capacity(4096 + jobs.len() * 4096);
    head(&mut html, "Scheduled jobs");
    html.push_str("<h1>Scheduled jobs</h1>\n");
    let _ = writeln!(
        html,
        "<p class=\"meta\">{} job{} in the store's roster (every replica's) · checked {} · \
         <a href=\"{}\">refresh</a> (every 30 s by itself)</p>",
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        time(now),
        escape(&here.link(after, (limit != app.page_size).then_some(limit))),
    );
    html.push_str(controls.note());
    if health.is_none() {
        html.push_str(
            "<p class=\"note\">The store did not answer for the jobs' health; their states are \
             unknown on this page.</p>\n",
        );
    }
    legend(&mut html, &Fate::STORED);
    html.push_str(
        "<table><thead><tr><th>Job</th><th>Schedule</th><th>Next fire</th>\
         <th>Last claimed</th><th>State</th><th>Last fires (oldest left, as the store recorded \
         them)</th><th>Actions</th></tr></thead><tbody>\n",
    );
    for (job, strip) in jobs.iter().zip(&strips) {
        let state = state_of(job, health.as_ref(), strip, now);
        row(
            &mut html, app, controls, here, after, limit, job, &state, strip, now,
        );
    }
    if jobs.is_empty() {
        html.push_str(
            "<tr><td colspan=\"7\">No jobs on this page. A replica announces its jobs in the \
             store when it starts.</td></tr>\n",
        );
    }
    html.push_str("</tbody></table>\n<nav>");
    let limit_shown = (limit != app.page_size).then_some(limit);
    if after.is_some() {
        let _ = write!(
            html,
            "<a href=\"{}\" rel=\"first\">first page</a> ",
            escape(&here.link(None, limit_shown))
        );
    }
    if let Some(next) = next {
        let _ = write!(
            html,
            "<a href=\"{}\" rel=\"next\">next page</a>",
            escape(&here.link(Some(next), limit_shown))
        );
    }
    html.push_str("</nav>\n</body></html>\n");
    html_page(StatusCode::OK, html)
}

/// The state shown: its CSS class and its words (HTML).
fn state_of(
    job: &StoredJob,
    health: Option<&StoreHealth>,
    strip: &Strip,
    now: DateTime<Utc>,
) -> (&'static str, String) {
    if let Some(p) = &job.paused {
        return (
            "paused",
            format!("paused by {} {}", escape(&p.by), when(p.at, now)),
        );
    }
    let health: Option<&StoredJobHealth> =
        health.and_then(|h| h.jobs.iter().find(|j| j.name == job.name));
    let running = matches!(strip, Strip::Marks(marks) if marks.last().is_some_and(|m| m.fate == Fate::Running));
    match health.map(|h| (&h.state, h.due)) {
        Some((StoredJobState::Paused { pause }, _)) => (
            "paused",
            format!("paused by {} {}", escape(&pause.by), when(pause.at, now)),
        ),
        Some((StoredJobState::OnTime, _)) if running => ("running", "running".to_owned()),
        Some((StoredJobState::OnTime, _)) => ("on_time", "on time".to_owned()),
        Some((StoredJobState::Missed, due)) => (
            "overdue",
            format!(
                "missed: no process gave the fire of {} a fate; is a replica running the job?",
                due.map_or_else(|| "—".to_owned(), |t| when(t, now))
            ),
        ),
        Some((StoredJobState::Overdue, due)) => (
            "overdue",
            format!(
                "overdue: the fire of {} did not run",
                due.map_or_else(|| "—".to_owned(), |t| when(t, now))
            ),
        ),
        Some((StoredJobState::Unknown { reason }, _)) => {
            ("unknown", format!("unknown: {}", escape(reason)))
        }
        Some(_) | None => ("unknown", "unknown".to_owned()),
    }
}

#[allow(clippy::too_many_arguments)]
fn row(
    html: &mut String,
    app: &App,
    controls: Controls,
    here: &Here,
    after: Option<&str>,
    limit: usize,
    job: &StoredJob,
    (class, words): &(&'static str, String),
    strip: &Strip,
    now: DateTime<Utc>,
) {
    let name = escape(&job.name);
    let _ = write!(
        html,
        "<tr data-job=\"{name}\" data-state=\"{class}\"><td><a href=\"{}\"><code>{name}</code>\
         </a><div class=\"sub\">announced by {}</div></td>",
        escape(&here.job(&job.name)),
        escape(&job.announced_by),
    );
    let _ = write!(html, "<td><code>{}</code></td>", escape(&job.schedule));
    match job.next_fire {
        Some(t) => {
            let _ = write!(html, "<td>{}</td>", when(t, now));
        }
        None => html.push_str("<td>—</td>"),
    }
    match job.last_claimed {
        Some(t) => {
            let _ = write!(html, "<td>{}</td>", when(t, now));
        }
        None => html.push_str("<td>—</td>"),
    }
    let _ = write!(
        html,
        "<td><span class=\"state {class}\">{words}</span></td><td>"
    );
    match strip {
        Strip::Marks(marks) => strip_svg(
            html,
            &job.name,
            marks,
            app.strip_len,
            "no fires recorded lately",
        ),
        Strip::NoHistory => html.push_str(
            "<span class=\"sub\">its guard keeps no history (postgres: <code>history = \
             true</code>)</span>",
        ),
        Strip::Failed(why) => {
            let _ = write!(
                html,
                "<span class=\"sub\">history unavailable: {}</span>",
                escape(why)
            );
        }
    }
    html.push_str("</td><td>");
    let hidden = format!(
        "<input type=\"hidden\" name=\"after\" value=\"{}\">\
         <input type=\"hidden\" name=\"limit\" value=\"{}\">",
        escape(after.unwrap_or("")),
        if limit == app.page_size {
            String::new()
        } else {
            limit.to_string()
        }
    );
    buttons(
        html,
        controls,
        job,
        &|action| here.action(action),
        &hidden,
        None,
    );
    html.push_str("</td></tr>\n");
}

/// Pause or resume, and run now. `run_off` disables run now and says why (plain text).
fn buttons(
    html: &mut String,
    controls: Controls,
    job: &StoredJob,
    target: &dyn Fn(&str) -> String,
    hidden: &str,
    run_off: Option<&str>,
) {
    let name = escape(&job.name);
    let (action, label) = if job.paused.is_some() {
        ("resume", "Resume")
    } else {
        ("pause", "Pause")
    };
    for (action, label) in [(action, label), ("run", "Run now")] {
        let disabled = match (controls, run_off) {
            (Controls::On, Some(why)) if action == "run" => {
                format!(" disabled title=\"{}\"", escape(why))
            }
            (controls, _) => controls.disabled().to_owned(),
        };
        let _ = write!(
            html,
            "<form method=\"post\" action=\"{}\" data-action=\"{action}\" data-job=\"{name}\">\
             <input type=\"hidden\" name=\"job\" value=\"{name}\">{hidden}\
             <button type=\"submit\"{disabled}>{label}</button></form>",
            escape(&target(action))
        );
    }
}

/// Carries out a button's action through the store.
pub(crate) async fn act(
    store: &Store,
    action: Action,
    job: &str,
    who: &str,
) -> Result<(), AdminError> {
    match action {
        Action::Pause => store.pause(job, who).await,
        Action::Resume => store.resume(job, who).await,
        Action::Run => store.trigger_if_live(job).await.map(|_key| ()),
    }
}

/// The answer to an action the store refused: a page that says why, with a link `back`.
pub(crate) fn refusal(e: &AdminError, back: &str) -> Response {
    let code = match e {
        AdminError::UnknownJob(_) => StatusCode::NOT_FOUND,
        AdminError::NoLiveReplica(_) | AdminError::Unsupported(_) => StatusCode::CONFLICT,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    let mut html = String::new();
    head(&mut html, "Refused");
    let _ = write!(
        html,
        "<h1>Not done</h1>\n<p class=\"note\" id=\"refusal\">{}</p>\n\
         <p><a href=\"{}\">back</a></p>\n</body></html>\n",
        escape(&chain(e)),
        escape(back)
    );
    html_page(code, html)
}

/// What the store tells of the replicas of a job, in words (plain text), and whether run now
/// would reach one.
fn liveness_words(l: &JobLiveness) -> (bool, String) {
    fn named(p: &StoreProcess) -> String {
        match p.pid {
            Some(pid) => format!("{} (pid {pid})", p.instance),
            None => p.instance.clone(),
        }
    }
    match &l.liveness {
        Liveness::Live { process } => (
            true,
            format!("runs on a live replica: {} is present", named(process)),
        ),
        Liveness::NoProcess { last } => (
            false,
            format!(
                "no live replica: no process attends this store{}, so none would take a run \
                 asked for now; start a replica that runs the job",
                last.as_ref().map_or_else(String::new, |p| format!(
                    " (the last was {}, {} s ago)",
                    named(p),
                    p.seen_ago.as_secs()
                ))
            ),
        ),
        Liveness::AnnouncerGone { present, .. } => (
            false,
            format!(
                "no live replica is known to run it: {}, which announced it last, is not \
                 present; {} other process{} present, but the store does not record which jobs \
                 each runs (`cronguard trigger --force` asks anyway)",
                l.announced_by,
                present.len(),
                if present.len() == 1 { " is" } else { "es are" }
            ),
        ),
        _ => (
            false,
            "the store's answer is not understood by this version".to_owned(),
        ),
    }
}

/// `GET /jobs/<name>`: one job's settings, state, controls, live replicas and history.
pub(crate) async fn job_page(
    State(app): State<App>,
    Path(name): Path<String>,
    OriginalUri(uri): OriginalUri,
    Query(query): Query<HashMap<String, String>>,
    request: Request,
) -> Response {
    let (parts, _) = request.into_parts();
    let controls = match app.may_read(&parts) {
        Ok(controls) => controls,
        Err(refused) => return refused,
    };
    let crate::Src::Store(store) = &app.source else {
        return text(StatusCode::NOT_FOUND, "no such page\n");
    };
    let rows = match limit_of(&query, DEFAULT_HISTORY_ROWS) {
        Ok(rows) => rows,
        Err(bad) => return bad,
    };
    let now = Utc::now();
    let since = match query.get("since").filter(|s| !s.is_empty()) {
        None => now - TimeDelta::days(1),
        Some(s) => match DateTime::parse_from_rfc3339(s) {
            Ok(t) => t.with_timezone(&Utc),
            Err(e) => {
                return text(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "`since` must be an RFC 3339 time such as 2026-01-31T08:00:00Z ({e})\n"
                    ),
                )
            }
        },
    };
    let here = Here::of_job_page(uri.path());
    let names = [name.as_str()];
    let (jobs, health, history, processes, liveness) = tokio::join!(
        store.jobs_named(&names),
        store.health_of(&names),
        store.history(&name, since),
        store.processes(),
        store.liveness(&name),
    );
    let job = match jobs {
        Ok(mut jobs) if !jobs.is_empty() => jobs.swap_remove(0),
        Ok(_) => {
            return text(
                StatusCode::NOT_FOUND,
                format!(
                    "no replica announced job `{name}` in this store; the dashboard's main page \
                     lists the jobs (check the name, and that the replicas use this store and \
                     have started)\n"
                ),
            )
        }
        Err(e) => return unavailable(&e),
    };
    let health = health.ok();
    let strip = match &history {
        Ok(entries) => Strip::Marks(entries.iter().map(Mark::of_entry).collect()),
        Err(AdminError::NoHistory(_)) => Strip::NoHistory,
        Err(e) => Strip::Failed(chain(e)),
    };
    let (class, words) = state_of(&job, health.as_ref(), &strip, now);
    let title = escape(&job.name);

    let mut html = String::with_capacity(8192);
    head(&mut html, &format!("{title} · scheduled jobs"));
    let _ = writeln!(
        html,
        "<p class=\"meta\"><a href=\"{}\" rel=\"up\">all jobs</a></p>\n<h1><code>{title}</code>\
         </h1>",
        escape(&here.link_from_job_page())
    );
    html.push_str(controls.note());
    let _ = write!(
        html,
        "<table class=\"settings\"><tbody>\
         <tr><th>State</th><td><span class=\"state {class}\" id=\"state\" \
         data-state=\"{class}\">{words}</span></td></tr>\
         <tr><th>Schedule</th><td><code>{}</code></td></tr>\
         <tr><th>Next fire</th><td>{}</td></tr>\
         <tr><th>Last claimed</th><td>{}</td></tr>\
         <tr><th>Announced</th><td>by <code>{}</code> {}</td></tr>",
        escape(&job.schedule),
        job.next_fire
            .map_or_else(|| "—".to_owned(), |t| when(t, now)),
        job.last_claimed
            .map_or_else(|| "—".to_owned(), |t| when(t, now)),
        escape(&job.announced_by),
        when(job.announced_at, now),
    );
    let run_off = match &liveness {
        Ok(l) => {
            let (live, words) = liveness_words(l);
            let _ = write!(
                html,
                "<tr><th>Replicas</th><td id=\"liveness\" data-live=\"{live}\">{}</td></tr>",
                escape(&words)
            );
            (!live).then_some(words)
        }
        Err(e) => {
            let words = format!(
                "the store did not tell whether a replica runs it: {}",
                chain(e)
            );
            let _ = write!(
                html,
                "<tr><th>Replicas</th><td id=\"liveness\" data-live=\"unknown\">{}</td></tr>",
                escape(&words)
            );
            None
        }
    };
    html.push_str("<tr><th>Actions</th><td>");
    buttons(
        &mut html,
        controls,
        &job,
        &|action| format!("../{action}"),
        "<input type=\"hidden\" name=\"back\" value=\"job\">",
        run_off.as_deref(),
    );
    if let (Some(why), Controls::On) = (&run_off, controls) {
        let _ = write!(
            html,
            "<div class=\"sub\" id=\"run-off\">Run now is off: {}</div>",
            escape(why)
        );
    }
    html.push_str("</td></tr></tbody></table>\n");

    // The live replicas.
    html.push_str("<h2>Processes at the store</h2>\n");
    match &processes {
        Ok(processes) if processes.is_empty() => {
            html.push_str("<p>No process attends this store.</p>\n");
        }
        Ok(processes) => {
            html.push_str(
                "<table id=\"processes\"><thead><tr><th>Instance</th><th>pid</th>\
                 <th>Last seen</th><th>Present</th></tr></thead><tbody>\n",
            );
            for p in processes {
                let _ = writeln!(
                    html,
                    "<tr data-instance=\"{0}\"><td><code>{0}</code></td><td>{1}</td>\
                     <td>{2} s ago</td><td>{3}</td></tr>",
                    escape(&p.instance),
                    p.pid.map_or_else(|| "—".to_owned(), |pid| pid.to_string()),
                    p.seen_ago.as_secs(),
                    if p.present { "yes" } else { "no" },
                );
            }
            html.push_str("</tbody></table>\n");
        }
        Err(e) => {
            let _ = writeln!(
                html,
                "<p class=\"note\">The store did not list its processes: {}</p>",
                escape(&chain(e))
            );
        }
    }

    // The history, newest first.
    let _ = writeln!(
        html,
        "<h2>History since {}</h2>\n<p class=\"meta\">Earlier: <a href=\"?since={}\">7 days</a> \
         · <a href=\"?since={}\">30 days</a> (<code>?since=</code> an RFC 3339 time, \
         <code>&amp;limit=</code> up to {})</p>",
        time(since),
        crate::page::encode(&(now - TimeDelta::days(7)).to_rfc3339()),
        crate::page::encode(&(now - TimeDelta::days(30)).to_rfc3339()),
        crate::MAX_PAGE_SIZE,
    );
    match &history {
        Ok(entries) => history_table(&mut html, entries, rows, now),
        Err(e) => {
            let _ = writeln!(html, "<p class=\"note\">{}</p>", escape(&chain(e)));
        }
    }
    html.push_str("</body></html>\n");
    html_page(StatusCode::OK, html)
}

/// The history's newest `rows` entries, newest first.
fn history_table(html: &mut String, entries: &[HistoryEntry], rows: usize, now: DateTime<Utc>) {
    if entries.is_empty() {
        html.push_str("<p>No fires recorded in this window.</p>\n");
        return;
    }
    if entries.len() > rows {
        let _ = writeln!(
            html,
            "<p class=\"meta\">The newest {rows} of {} entries.</p>",
            entries.len()
        );
    }
    html.push_str(
        "<table id=\"history\"><thead><tr><th>Fire</th><th>Outcome</th><th>Instance</th>\
         <th>Fencing token</th><th>Started</th><th>Ended</th><th>Error or reason</th></tr>\
         </thead><tbody>\n",
    );
    for entry in entries.iter().rev().take(rows) {
        let mark = Mark::of_entry(entry);
        let _ = writeln!(
            html,
            "<tr data-fire=\"{}\" data-outcome=\"{}\" data-instance=\"{}\"><td>{}</td>\
             <td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            entry.fire_time.to_rfc3339(),
            entry.outcome.as_str(),
            escape(&entry.instance),
            when(entry.fire_time, now),
            entry.outcome.as_str(),
            escape(&entry.instance),
            entry
                .fencing_token
                .map_or_else(|| "—".to_owned(), |t| t.to_string()),
            entry.started.map_or_else(|| "—".to_owned(), time),
            entry.ended.map_or_else(|| "—".to_owned(), time),
            escape(&mark.detail),
        );
    }
    html.push_str("</tbody></table>\n");
}
