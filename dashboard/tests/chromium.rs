//! The dashboard in a real browser: headless Chromium (Debian's `chromium` package) renders the
//! page, the strip of a job shows the misfire this test caused, and pressing the page's own
//! pause button pauses the job.
//!
//! Pressing the button: the page has no script and Chromium's command line cannot click, so the
//! test serves, on the same origin as the dashboard, a page that frames the dashboard and clicks
//! its pause button when the frame has loaded (the only script here stands in for the operator's
//! click). The service's authorisation check accepts a cookie that this test page sets, as a
//! login would; the POST is the browser's own form submission, with its own `Sec-Fetch-Site`,
//! followed by the dashboard's 303 back to the page.
//!
//! Without `chromium` the test is skipped with a notice; in CI (`CI` set) it fails instead.

mod common;

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use common::{eventually, request, scheduler, serve, SLOW, TICK};
use cronguard_dashboard::Dashboard;

const COOKIE: &str = "ops_session=s3cret";

/// The test's stand-in for the operator: frames the dashboard and presses `tick`'s pause button.
const PRESS_PAUSE: &str = r#"<!doctype html>
<html><head><title>pressing pause</title></head><body>
<iframe id="ops" src="/ops" width="1400" height="700"></iframe>
<script>
let pressed = false;
document.getElementById('ops').addEventListener('load', function () {
  if (pressed) { document.title = 'pressed'; return; }
  const button = this.contentDocument.querySelector(
    'form[data-action="pause"][data-job="tick"] button');
  if (!button) { document.title = 'no pause button'; return; }
  pressed = true;
  button.click();
});
</script>
</body></html>
"#;

/// Chromium's command line for `url`, with a profile of its own in `profile`.
fn chromium(profile: &std::path::Path, url: &str, dump: bool) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-dev-shm-usage",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    if dump {
        cmd.arg("--dump-dom");
    }
    cmd.arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// The DOM of `url` once loaded, as Chromium serialises it.
async fn dump_dom(profile: &std::path::Path, url: &str) -> String {
    let child = chromium(profile, url, true)
        .spawn()
        .expect("chromium starts");
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("chromium dumps the page within 60 s")
        .expect("chromium runs");
    assert!(out.status.success(), "chromium failed: {:?}", out.status);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `<tr>` of job `name` in a DOM.
fn row<'a>(dom: &'a str, name: &str) -> &'a str {
    let start = dom
        .find(&format!("<tr data-job=\"{name}\""))
        .unwrap_or_else(|| panic!("a row for {name}: {dom}"));
    let len = dom[start..].find("</tr>").expect("the row ends");
    &dom[start..start + len]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_renders_the_page_shows_the_misfire_and_pauses_a_job() {
    if !cronguard_testkit::require_program(
        "chromium",
        "the dashboard's browser test",
        "apt-get install chromium",
        cronguard_testkit::in_ci(),
    ) {
        return;
    }
    let handle = scheduler().await;
    let dashboard = Dashboard::new(&handle)
        .authorize(|request| {
            let cookies = request.headers.get("cookie")?.to_str().ok()?;
            cookies
                .split(';')
                .any(|c| c.trim() == COOKIE)
                .then(|| "chromium".to_owned())
        })
        .router();
    let app = Router::new().nest("/ops", dashboard).route(
        "/test/press-pause",
        get(|| async {
            (
                [
                    ("content-type", "text/html; charset=utf-8"),
                    (
                        "set-cookie",
                        "ops_session=s3cret; Path=/; SameSite=Strict; HttpOnly",
                    ),
                ],
                PRESS_PAUSE,
            )
                .into_response()
        }),
    );
    let addr: SocketAddr = serve(app).await;
    let profile = std::env::temp_dir().join(format!(
        "cronguard-dashboard-chromium-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&profile);

    // The first run of SLOW blocks 1.2 s; its next fires wait past their 100 ms grace.
    eventually(
        "the misfire on the page",
        Duration::from_secs(10),
        || async {
            let page = request(addr, "GET", "/ops", &[], None).await.body;
            row(&page, SLOW).contains(r#"data-fate="misfired""#)
        },
    )
    .await;
    let dom = dump_dom(&profile, &format!("http://{addr}/ops")).await;
    assert!(dom.contains("<h1>Scheduled jobs</h1>"), "{dom}");
    let slow = row(&dom, SLOW);
    assert!(slow.contains("<svg class=\"strip\""), "{slow}");
    assert!(slow.contains(r#"data-fate="misfired""#), "{slow}");
    assert!(
        slow.contains("— misfired: "),
        "the misfire's tooltip: {slow}"
    );
    assert!(
        row(&dom, TICK).contains(r#"data-state="on_time""#)
            || row(&dom, TICK).contains(r#"data-state="running""#)
    );

    // Press pause in the browser.
    let mut pressing = chromium(&profile, &format!("http://{addr}/test/press-pause"), false)
        .spawn()
        .expect("chromium starts");
    eventually(
        "chromium to pause tick",
        Duration::from_secs(60),
        || async { handle.monitor().job(TICK).and_then(|j| j.paused).is_some() },
    )
    .await;
    let _ = pressing.kill().await;
    let paused = handle
        .monitor()
        .job(TICK)
        .and_then(|j| j.paused)
        .expect("paused");
    assert_eq!(paused.by, "chromium");
    let dom = dump_dom(&profile, &format!("http://{addr}/ops")).await;
    let tick = row(&dom, TICK);
    assert!(tick.contains(r#"data-state="paused""#), "{tick}");
    assert!(tick.contains("paused by chromium"), "{tick}");
    let _ = std::fs::remove_dir_all(&profile);
    handle.shutdown().await;
}
