//! The page: plain HTML, inline CSS, inline SVG. Every name, reason and error is user data and is
//! escaped.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use cronguard::{Health, HealthState, JobStatus, JobsPage};

use crate::strip::{time, Fate, Mark, Strips};

/// What one page shows.
pub(crate) struct View<'a> {
    pub(crate) jobs: &'a JobsPage,
    pub(crate) health: &'a Health,
    pub(crate) strips: &'a Strips,
    pub(crate) total: usize,
    pub(crate) after: Option<&'a str>,
    pub(crate) limit: usize,
    pub(crate) default_limit: usize,
    pub(crate) controls: Controls,
    pub(crate) here: &'a Here,
}

/// Whether the page's buttons work for the one who asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Controls {
    /// No authorisation check is configured: every POST is refused.
    Off,
    /// The one who asks may read, not operate.
    ReadOnly,
    /// The buttons work (or the check decides at the POST).
    On,
}

impl Controls {
    /// The note the page shows above the table, if any.
    pub(crate) fn note(self) -> &'static str {
        match self {
            Controls::Off => {
                "<p class=\"note\" id=\"controls-off\">The buttons are off: this service configured \
                 no authorisation check (<code>Dashboard::authorize</code>).</p>\n"
            }
            Controls::ReadOnly => {
                "<p class=\"note\" id=\"controls-read-only\">Read-only: the buttons need the \
                 operator role.</p>\n"
            }
            Controls::On => "",
        }
    }

    /// The attributes of a disabled button, or nothing.
    pub(crate) fn disabled(self) -> &'static str {
        match self {
            Controls::Off => " disabled title=\"no authorisation check is configured\"",
            Controls::ReadOnly => " disabled title=\"read-only: needs the operator role\"",
            Controls::On => "",
        }
    }
}

/// `s` escaped for HTML text and quoted attribute values.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `s` percent-encoded for a URL's query (everything but unreserved characters).
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Where the page is, as relative links from the page itself (and from its forms' targets) see
/// it: the last segment of its path, so that they work under any mount path and behind a proxy
/// that adds a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Here {
    /// The page's last path segment (`ops` for `/x/ops`), empty when its path ends with `/`.
    segment: String,
    /// Whether the links are seen from a form's target (`/x/ops/pause`), one level deeper.
    from_child: bool,
}

impl Here {
    /// The page at `path`.
    pub(crate) fn of(path: &str) -> Self {
        Here {
            segment: path.rsplit('/').next().unwrap_or_default().to_owned(),
            from_child: false,
        }
    }

    /// The page whose form posted to `path` (`/x/ops/pause`).
    pub(crate) fn back_from(path: &str) -> Self {
        let page = path.rsplit_once('/').map_or("", |(page, _)| page);
        Here {
            from_child: true,
            ..Here::of(page)
        }
    }

    /// The relative link to the page, listing the jobs after `after`, `limit` of them if given.
    pub(crate) fn link(&self, after: Option<&str>, limit: Option<usize>) -> String {
        let mut query = Vec::new();
        if let Some(after) = after {
            query.push(format!("after={}", encode(after)));
        }
        if let Some(limit) = limit {
            query.push(format!("limit={limit}"));
        }
        let page = match (self.segment.is_empty(), self.from_child) {
            (true, _) => "./".to_owned(),
            (false, false) => self.segment.clone(),
            (false, true) => format!("../{}", self.segment),
        };
        if query.is_empty() {
            page
        } else {
            format!("{page}?{}", query.join("&"))
        }
    }

    /// The relative link to the page of job `name`.
    pub(crate) fn job(&self, name: &str) -> String {
        self.action(&format!("jobs/{}", encode(name)))
    }

    /// The relative link to the page of job `name` from a form's target (`/x/ops/pause`).
    pub(crate) fn job_from_action(name: &str) -> String {
        format!("jobs/{}", encode(name))
    }

    /// The page whose job page is at `path` (`/x/ops/jobs/name`).
    pub(crate) fn of_job_page(path: &str) -> Self {
        let page = path
            .rsplit_once('/')
            .and_then(|(jobs, _)| jobs.rsplit_once('/'))
            .map_or("", |(page, _)| page);
        Here::of(page)
    }

    /// The relative link to the page from one of its job pages.
    pub(crate) fn link_from_job_page(&self) -> String {
        if self.segment.is_empty() {
            "../".to_owned()
        } else {
            format!("../../{}", self.segment)
        }
    }

    /// The relative link to the form target `action` (`pause`).
    pub(crate) fn action(&self, action: &str) -> String {
        if self.segment.is_empty() {
            action.to_owned()
        } else {
            format!("{}/{action}", self.segment)
        }
    }
}

/// How far `t` is from `now`, in words: `in 4 s`, `3 min ago`.
pub(crate) fn relative(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (t - now).num_seconds();
    let n = secs.unsigned_abs();
    let amount = match n {
        0..=59 => format!("{n} s"),
        60..=3599 => format!("{} min", n / 60),
        3600..=172_799 => format!("{} h", n / 3600),
        _ => format!("{} days", n / 86_400),
    };
    if secs >= 0 {
        format!("in {amount}")
    } else {
        format!("{amount} ago")
    }
}

/// A `<time>` element: the instant, with how far it is from now.
pub(crate) fn when(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    format!(
        "<time datetime=\"{}\" title=\"{}\">{}</time>",
        t.to_rfc3339(),
        time(t),
        relative(t, now)
    )
}

pub(crate) const STYLE: &str = "
body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5rem;color:#1f2328;background:#fff}
h1{font-size:1.4rem;margin:0 0 .3rem}
.meta,.note{color:#57606a}
.note{background:#fff8c5;border:1px solid #d4a72c;padding:.4rem .6rem;border-radius:4px;color:#3b2e00}
table{border-collapse:collapse;width:100%;margin-top:1rem}
th,td{text-align:left;padding:.45rem .6rem;border-bottom:1px solid #d0d7de;vertical-align:middle}
th{background:#f6f8fa;font-weight:600}
code{font:13px ui-monospace,SFMono-Regular,Menlo,monospace}
.sub{color:#57606a;font-size:12px}
.state{display:inline-block;padding:.1rem .5rem;border-radius:1rem;font-size:12px;font-weight:600;white-space:nowrap}
.on_time{background:#dafbe1;color:#116329}
.overdue{background:#ffebe9;color:#a40e26}
.paused{background:#eaeef2;color:#424a53}
.running{background:#fff8c5;color:#7d4e00}
.unknown{background:#fbefff;color:#6e40c9}
form{display:inline;margin:0}
button{font:inherit;font-size:12px;padding:.15rem .6rem;margin:0 .15rem .15rem 0;border:1px solid #8c959f;border-radius:4px;background:#f6f8fa;cursor:pointer}
button:disabled{cursor:not-allowed;opacity:.5}
.legend span{display:inline-flex;align-items:center;margin-right:.9rem}
.legend svg{margin-right:.3rem}
nav{margin-top:1rem}
";

/// Renders the page.
pub(crate) fn render(view: &View<'_>) -> String {
    let now = view.health.checked_at;
    let mut html = String::with_capacity(4096 + view.jobs.jobs.len() * 2048);
    html.push_str(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"refresh\" content=\"30\">\
         <title>Scheduled jobs</title><style>",
    );
    html.push_str(STYLE);
    html.push_str("</style></head><body>\n<h1>Scheduled jobs</h1>\n");
    let _ = writeln!(
        html,
        "<p class=\"meta\">{} job{} in this process · checked {} · <a href=\"{}\">refresh</a> \
         (every 30 s by itself)</p>",
        view.total,
        if view.total == 1 { "" } else { "s" },
        time(now),
        escape(&view.here.link(
            view.after,
            (view.limit != view.default_limit).then_some(view.limit)
        )),
    );
    html.push_str(view.controls.note());
    let gaps = view.strips.gaps();
    if gaps.missed > 0 {
        let _ = writeln!(
            html,
            "<p class=\"note\">The strips missed {} events: the dashboard fell behind the \
             scheduler's event stream.</p>",
            gaps.missed
        );
    }
    if gaps.untracked > 0 {
        let _ = writeln!(
            html,
            "<p class=\"note\">{} fires of jobs beyond the tracked limit are not drawn \
             (<code>Dashboard::max_tracked_jobs</code>).</p>",
            gaps.untracked
        );
    }
    legend(&mut html, &Fate::ALL);
    html.push_str(
        "<table><thead><tr><th>Job</th><th>Schedule</th><th>Next fire</th><th>Last run</th>\
         <th>State</th><th>Last fires (oldest left)</th><th>Actions</th></tr></thead><tbody>\n",
    );
    for job in &view.jobs.jobs {
        row(&mut html, view, job, now);
    }
    if view.jobs.jobs.is_empty() {
        html.push_str("<tr><td colspan=\"7\">No jobs on this page.</td></tr>\n");
    }
    html.push_str("</tbody></table>\n<nav>");
    if view.after.is_some() {
        let limit = (view.limit != view.default_limit).then_some(view.limit);
        let _ = write!(
            html,
            "<a href=\"{}\" rel=\"first\">first page</a> ",
            escape(&view.here.link(None, limit))
        );
    }
    if let Some(next) = &view.jobs.next {
        let limit = (view.limit != view.default_limit).then_some(view.limit);
        let _ = write!(
            html,
            "<a href=\"{}\" rel=\"next\">next page</a>",
            escape(&view.here.link(Some(next), limit))
        );
    }
    html.push_str("</nav>\n</body></html>\n");
    html
}

/// The legend of the strips' colours, for `fates`.
pub(crate) fn legend(html: &mut String, fates: &[Fate]) {
    html.push_str("<p class=\"legend\">");
    for &fate in fates {
        let _ = write!(
            html,
            "<span><svg width=\"10\" height=\"14\" aria-hidden=\"true\"><rect width=\"8\" \
             height=\"14\" rx=\"1\" fill=\"{}\"/></svg>{}</span>",
            fate.colour(),
            fate.label()
        );
    }
    html.push_str("</p>\n");
}

/// The state shown, its CSS class and its words.
fn state(
    job: &JobStatus,
    health: Option<&HealthState>,
    now: DateTime<Utc>,
) -> (&'static str, String) {
    if let Some(p) = &job.paused {
        return (
            "paused",
            format!("paused by {} {}", escape(&p.by), when(p.at, now)),
        );
    }
    if job.running > 0 {
        let n = job.running;
        return (
            "running",
            if n == 1 {
                "running".to_owned()
            } else {
                format!("running ×{n}")
            },
        );
    }
    match health {
        Some(HealthState::OnTime) => ("on_time", "on time".to_owned()),
        Some(HealthState::Overdue { missed, .. }) => (
            "overdue",
            format!("overdue: the fire of {} did not run", when(*missed, now)),
        ),
        Some(HealthState::Paused { by, at }) => (
            "paused",
            format!("paused by {} {}", escape(by), when(*at, now)),
        ),
        Some(HealthState::Unknown { reason }) => {
            ("unknown", format!("unknown: {}", escape(reason)))
        }
        Some(_) | None => ("unknown", "unknown".to_owned()),
    }
}

fn row(html: &mut String, view: &View<'_>, job: &JobStatus, now: DateTime<Utc>) {
    let name = escape(&job.name);
    let health = view
        .health
        .jobs
        .iter()
        .find(|h| h.name == job.name)
        .map(|h| &h.state);
    let (class, words) = state(job, health, now);
    let _ = write!(
        html,
        "<tr data-job=\"{name}\" data-state=\"{class}\"><td><code>{name}</code>{}</td>",
        if job.enabled {
            ""
        } else {
            "<div class=\"sub\">not fired by this process</div>"
        }
    );
    let _ = write!(
        html,
        "<td>{}<div class=\"sub\"><code>{}</code></div></td>",
        escape(&job.description),
        escape(&job.schedule)
    );
    match job.next_fire {
        Some(t) => {
            let _ = write!(html, "<td>{}</td>", when(t, now));
        }
        None => html.push_str("<td>—</td>"),
    }
    match &job.last_run {
        Some(run) => {
            let outcome = run.outcome.as_ref().map_or("running", |kind| kind.name());
            let _ = write!(
                html,
                "<td>{outcome} <span class=\"sub\">{}</span></td>",
                when(run.started_at, now)
            );
        }
        None => html.push_str("<td>—</td>"),
    }
    let _ = write!(
        html,
        "<td><span class=\"state {class}\">{words}</span></td><td>"
    );
    strip_svg(
        html,
        &job.name,
        &view.strips.of(&job.name),
        view.strips.len(),
        "no fires seen yet",
    );
    html.push_str("</td><td>");
    buttons(html, view, job);
    html.push_str("</td></tr>\n");
}

/// The strip: one bar per fire, oldest left, coloured by fate, with its details as a tooltip.
/// `empty` is what an empty strip says (plain text).
pub(crate) fn strip_svg(html: &mut String, job: &str, marks: &[Mark], len: usize, empty: &str) {
    const W: usize = 8;
    const GAP: usize = 2;
    const H: usize = 18;
    if marks.is_empty() {
        let _ = write!(html, "<span class=\"sub\">{empty}</span>");
        return;
    }
    let width = len * (W + GAP);
    let _ = write!(
        html,
        "<svg class=\"strip\" width=\"{width}\" height=\"{H}\" viewBox=\"0 0 {width} {H}\" \
         role=\"img\" aria-label=\"the last {} fires of {}\">",
        marks.len(),
        escape(job)
    );
    for (i, mark) in marks.iter().enumerate() {
        let mut title = format!("{} — {}", time(mark.fire_time), mark.fate.label());
        if !mark.detail.is_empty() {
            let _ = write!(title, ": {}", mark.detail);
        }
        if mark.run_key.is_empty() {
            let _ = write!(title, " (on {})", mark.instance);
        } else {
            let _ = write!(title, " ({}, on {})", mark.run_key, mark.instance);
        }
        let _ = write!(
            html,
            "<rect x=\"{}\" y=\"0\" width=\"{W}\" height=\"{H}\" rx=\"1\" fill=\"{}\" \
             data-fate=\"{}\" data-fire=\"{}\"><title>{}</title></rect>",
            i * (W + GAP),
            mark.fate.colour(),
            mark.fate.id(),
            mark.fire_time.to_rfc3339(),
            escape(&title)
        );
    }
    html.push_str("</svg>");
}

fn buttons(html: &mut String, view: &View<'_>, job: &JobStatus) {
    let disabled = view.controls.disabled();
    let after = escape(view.after.unwrap_or(""));
    let limit = if view.limit == view.default_limit {
        String::new()
    } else {
        view.limit.to_string()
    };
    let name = escape(&job.name);
    let (action, label) = if job.paused.is_some() {
        ("resume", "Resume")
    } else {
        ("pause", "Pause")
    };
    for (action, label) in [(action, label), ("run", "Run now")] {
        let target = escape(&view.here.action(action));
        let _ = write!(
            html,
            "<form method=\"post\" action=\"{target}\" data-action=\"{action}\" \
             data-job=\"{name}\"><input type=\"hidden\" name=\"job\" value=\"{name}\">\
             <input type=\"hidden\" name=\"after\" value=\"{after}\">\
             <input type=\"hidden\" name=\"limit\" value=\"{limit}\">\
             <button type=\"submit\"{disabled}>{label}</button></form>"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn links_are_relative_and_encoded() {
        let root = Here::of("/");
        assert_eq!(root.link(None, None), "./");
        assert_eq!(root.action("pause"), "pause");
        assert_eq!(Here::back_from("/pause").link(None, None), "./");
        let ops = Here::of("/x/ops");
        assert_eq!(
            ops.link(Some("a b&c/d"), Some(5)),
            "ops?after=a%20b%26c%2Fd&limit=5"
        );
        assert_eq!(ops.action("run"), "ops/run");
        assert_eq!(Here::back_from("/x/ops/run").link(None, None), "../ops");
        assert_eq!(encode("é"), "%C3%A9");
        assert_eq!(ops.job("a/b c"), "ops/jobs/a%2Fb%20c");
        assert_eq!(root.job("x"), "jobs/x");
        let from_job = Here::of_job_page("/x/ops/jobs/a%2Fb");
        assert_eq!(from_job, ops);
        assert_eq!(from_job.link_from_job_page(), "../../ops");
        assert_eq!(Here::of_job_page("/jobs/x").link_from_job_page(), "../");
    }

    #[test]
    fn relative_times_read_naturally() {
        let now = DateTime::<Utc>::UNIX_EPOCH;
        assert_eq!(relative(now + chrono::TimeDelta::seconds(4), now), "in 4 s");
        assert_eq!(
            relative(now - chrono::TimeDelta::minutes(3), now),
            "3 min ago"
        );
    }
}
