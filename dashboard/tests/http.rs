//! The dashboard over HTTP on a loopback listener: the page lists the jobs and escapes their
//! names, draws a misfire the test caused in the job's strip, pages through jobs, and the
//! buttons' POSTs are refused without an authorisation check and carried out with one.

mod common;

use std::time::Duration;

use axum::Router;
use common::{enc, eventually, request, scheduler, serve, FAILING, SLOW, TICK};
use cronguard::EventKind;
use cronguard_dashboard::Dashboard;

/// The `<tr>` of job `name` in `page` (names here need no escaping).
fn row<'a>(page: &'a str, name: &str) -> &'a str {
    let start = page
        .find(&format!("<tr data-job=\"{name}\""))
        .unwrap_or_else(|| panic!("a row for {name}: {page}"));
    let len = page[start..].find("</tr>").expect("the row ends");
    &page[start..start + len]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_lists_jobs_escapes_names_and_draws_the_misfire_the_test_caused() {
    let handle = scheduler().await;
    let app = Router::new().nest("/ops", Dashboard::new(&handle).router());
    let addr = serve(app).await;

    // The first run of SLOW blocks 1.2 s; its next fires wait past their 100 ms grace.
    eventually(
        "a misfire in the strip",
        Duration::from_secs(10),
        || async {
            let page = request(addr, "GET", "/ops", &[], None).await.body;
            row(&page, SLOW).contains(r#"data-fate="misfired""#)
        },
    )
    .await;
    let reply = request(addr, "GET", "/ops", &[], None).await;
    assert_eq!(reply.code, 200);
    assert_eq!(
        reply.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let csp = reply.header("content-security-policy").expect("a CSP");
    assert!(csp.contains("default-src 'none'"), "{csp}");
    let page = reply.body;
    let slow = row(&page, SLOW);
    assert!(slow.contains("every 300 milliseconds"), "{slow}");
    assert!(
        slow.contains("— misfired: ") && slow.contains(&format!("({SLOW}@")),
        "the misfire's tooltip says what and which fire: {slow}"
    );
    assert!(row(&page, TICK).contains(r#"data-fate="ran""#), "{page}");
    eventually(
        "a failed run in the strip",
        Duration::from_secs(5),
        || async {
            let page = request(addr, "GET", "/ops", &[], None).await.body;
            row(&page, FAILING).contains(r#"data-fate="failed""#)
        },
    )
    .await;
    let page = request(addr, "GET", "/ops", &[], None).await.body;
    assert!(!page.contains("<img"), "an error is never markup: {page}");
    assert!(!page.contains("<script"), "no script: {page}");
    assert!(
        row(&page, FAILING)
            .contains("failed: &lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;&#39;q&#39;"),
        "{page}"
    );
    assert!(page.contains(r#"id="controls-off""#), "{page}");
    assert!(page.contains("<button type=\"submit\" disabled"), "{page}");
    // Every link is relative, so the page works under any mount path.
    assert!(
        !page.contains("href=\"/") && !page.contains("action=\"/"),
        "{page}"
    );

    // Paging: one job a page, sorted by name, with a link to the next.
    let first = request(addr, "GET", "/ops?limit=1", &[], None).await.body;
    assert_eq!(first.matches("<tr data-job=").count(), 1, "{first}");
    assert!(
        first.contains(&format!("<tr data-job=\"{FAILING}\"")),
        "{first}"
    );
    let next = format!("ops?after={FAILING}&amp;limit=1");
    assert!(first.contains(&next), "{next} in {first}");
    let second = request(
        addr,
        "GET",
        &format!("/ops?after={FAILING}&limit=1"),
        &[],
        None,
    )
    .await
    .body;
    assert!(
        second.contains(&format!("<tr data-job=\"{SLOW}\"")),
        "{second}"
    );
    assert_eq!(
        request(addr, "GET", "/ops?limit=0", &[], None).await.code,
        400
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buttons_are_refused_without_a_check_and_pause_resume_and_run_with_one() {
    let handle = scheduler().await;
    let mut events = handle.monitor().subscribe();
    let open = Router::new().nest("/ops", Dashboard::new(&handle).router());
    let open = serve(open).await;
    let form = format!("job={}", enc(TICK));

    // No check configured: every POST is refused, and told how to configure one.
    let reply = request(open, "POST", "/ops/pause", &[], Some(&form)).await;
    assert_eq!(reply.code, 403);
    assert!(
        reply.body.contains("Dashboard::authorize"),
        "{}",
        reply.body
    );
    assert!(handle.monitor().job(TICK).expect("tick").paused.is_none());

    let guarded = Dashboard::new(&handle)
        .authorize(|request| {
            let token = request.headers.get("x-ops-token")?.to_str().ok()?;
            (token == "s3cret").then(|| "alice <ops>".to_owned())
        })
        .router();
    let addr = serve(Router::new().nest("/ops", guarded)).await;
    let token = [("x-ops-token", "s3cret")];
    let page = request(addr, "GET", "/ops", &[], None).await.body;
    assert!(
        !page.contains("controls-off") && !page.contains(" disabled"),
        "{page}"
    );
    assert_eq!(
        request(addr, "POST", "/ops/pause", &[], Some(&form))
            .await
            .code,
        403
    );
    assert_eq!(
        request(
            addr,
            "POST",
            "/ops/pause",
            &[("x-ops-token", "wrong")],
            Some(&form)
        )
        .await
        .code,
        403
    );
    let forged = [("x-ops-token", "s3cret"), ("sec-fetch-site", "cross-site")];
    assert_eq!(
        request(addr, "POST", "/ops/pause", &forged, Some(&form))
            .await
            .code,
        403,
        "a browser's cross-site POST is refused"
    );
    assert!(handle.monitor().job(TICK).expect("tick").paused.is_none());

    // Pause: 303 back to the page, which shows the job paused with a resume button.
    let reply = request(addr, "POST", "/ops/pause", &token, Some(&form)).await;
    assert_eq!(reply.code, 303, "{}", reply.body);
    assert_eq!(reply.header("location"), Some("../ops"));
    let paused = handle
        .monitor()
        .job(TICK)
        .expect("tick")
        .paused
        .expect("paused");
    assert_eq!(paused.by, "alice <ops>");
    let page = request(addr, "GET", "/ops", &[], None).await.body;
    let tick = row(&page, TICK);
    assert!(tick.contains(r#"data-state="paused""#), "{tick}");
    assert!(tick.contains("paused by alice &lt;ops&gt;"), "{tick}");
    assert!(tick.contains(r#"action="ops/resume""#), "{tick}");
    // The page to return to is kept.
    let reply = request(
        addr,
        "POST",
        "/ops/resume",
        &token,
        Some(&format!("{form}&after=a%20b&limit=5")),
    )
    .await;
    assert_eq!(reply.code, 303);
    assert_eq!(reply.header("location"), Some("../ops?after=a%20b&limit=5"));
    assert!(handle.monitor().job(TICK).expect("tick").paused.is_none());

    // Run now: a run with a manual key.
    let reply = request(addr, "POST", "/ops/run", &token, Some(&form)).await;
    assert_eq!(reply.code, 303, "{}", reply.body);
    let manual = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.recv().await {
                Ok(e)
                    if &*e.job == TICK && e.manual.is_some() && e.kind == EventKind::Succeeded =>
                {
                    return e
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("{e}"),
            }
        }
    })
    .await
    .expect("the manual run ends");
    assert!(
        manual.run_key.starts_with("tick@manual:"),
        "{}",
        manual.run_key
    );
    eventually(
        "the manual run in the strip",
        Duration::from_secs(5),
        || async {
            let page = request(addr, "GET", "/ops", &[], None).await.body;
            row(&page, TICK).contains(&*manual.run_key)
        },
    )
    .await;

    let unknown = request(addr, "POST", "/ops/run", &token, Some("job=nope")).await;
    assert_eq!(unknown.code, 404);
    assert!(unknown.body.contains("nope"), "{}", unknown.body);
    assert_eq!(
        request(addr, "GET", "/ops/pause", &token, None).await.code,
        405,
        "the controls answer POST only"
    );
    handle.shutdown().await;
}
