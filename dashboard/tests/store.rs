//! The dashboard over a Redis store on loopback: two replicas run a job every second; a dashboard
//! built over the store alone shows in the job's strip and on its own page exactly the fires
//! (times and instances) the store's history holds, still after the replicas stop and another
//! starts; a viewer reads but cannot press the buttons, an operator pauses and resumes through
//! the store, and run now is refused, with the store's reason, once no replica is live.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use axum::Router;
use chrono::{DateTime, Utc};
use common::{enc, eventually, request, serve};
use cronguard::admin::Store;
use cronguard::history::Outcome;
use cronguard::{Cronguard, Job, Lock, Schedule};
use cronguard_dashboard::{Dashboard, Tokens};
use cronguard_testkit::RedisServer;

/// A job whose name needs encoding in a URL (`:`).
const JOB: &str = "reports:daily.x";
/// [`JOB`] in a URL's path.
const JOB_IN_URL: &str = "reports%3Adaily.x";
const OPERATOR: [(&str, &str); 1] = [("authorization", "Bearer op-token")];
const VIEWER: [(&str, &str); 1] = [("authorization", "Bearer read-token")];

async fn replica(url: &str, instance: &str) -> Cronguard {
    let job = Job::new(JOB, Schedule::every(Duration::from_secs(1)).expect("valid"))
        .lock(Lock::Redis)
        .run(|_| async {});
    cronguard::builder()
        .registered_jobs(false)
        .instance(instance)
        .redis_url(url)
        .job(job)
        .start()
        .await
        .expect("the replica starts")
}

/// The `(fire time, instance)` of every bar of the strip in `page`.
fn strip_of(page: &str) -> BTreeSet<(String, String)> {
    page.split("<rect ")
        .skip(1)
        .filter_map(|rect| {
            let fire = rect.split("data-fire=\"").nth(1)?.split('"').next()?;
            let title = rect.split("<title>").nth(1)?.split("</title>").next()?;
            let instance = title.rsplit("on ").next()?.trim_end_matches(')');
            Some((fire.to_owned(), instance.to_owned()))
        })
        .collect()
}

/// The `(fire time, instance)` of every row of the history table in `page`.
fn history_rows_of(page: &str) -> Vec<(String, String)> {
    page.split("<tr data-fire=\"")
        .skip(1)
        .filter_map(|row| {
            let fire = row.split('"').next()?;
            let instance = row.split("data-instance=\"").nth(1)?.split('"').next()?;
            Some((fire.to_owned(), instance.to_owned()))
        })
        .collect()
}

async fn history(store: &Store) -> Vec<(String, String)> {
    store
        .history(JOB, DateTime::<Utc>::UNIX_EPOCH)
        .await
        .expect("the history")
        .into_iter()
        .filter(|e| e.outcome != Outcome::Running)
        .map(|e| (e.fire_time.to_rfc3339(), e.instance))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_view_shows_every_replicas_fires_after_a_restart_with_roles_and_controls() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let url = redis.url();
    let a = replica(&url, "replica-a").await;
    let b = replica(&url, "replica-b").await;
    let reader = Store::redis(&url, "cronguard").await.expect("the store");
    let store = Store::redis(&url, "cronguard").await.expect("the store");
    let dashboard = Dashboard::for_store(store)
        .tokens(Tokens::new().operator("op-token").viewer("read-token"))
        .strip_len(100)
        .router();
    let addr = serve(Router::new().nest("/ops", dashboard)).await;

    eventually(
        "three fires in the store's history",
        Duration::from_secs(15),
        || async { history(&reader).await.len() >= 3 },
    )
    .await;
    a.shutdown().await;
    b.shutdown().await;
    let before = history(&reader).await;
    let instances: BTreeSet<&str> = before.iter().map(|(_, i)| i.as_str()).collect();
    assert!(
        instances
            .iter()
            .all(|i| ["replica-a", "replica-b"].contains(i)),
        "{before:?}"
    );

    // The page over the store shows exactly the fires the history holds, with where they ran.
    let reply = request(addr, "GET", "/ops", &VIEWER, None).await;
    assert_eq!(reply.code, 200, "{}", reply.body);
    let page = reply.body;
    assert!(page.contains(r#"id="controls-read-only""#), "{page}");
    let shown = strip_of(&page);
    let expected: BTreeSet<(String, String)> = before.iter().cloned().collect();
    assert_eq!(shown, expected, "{page}");
    let link = format!("href=\"ops/jobs/{JOB_IN_URL}\"");
    assert!(page.contains(&link), "{link} in {page}");

    // A new replica after the others stopped: the earlier fires are still shown.
    let c = replica(&url, "replica-c").await;
    eventually(
        "a fire of replica-c on the page",
        Duration::from_secs(15),
        || async {
            let page = request(addr, "GET", "/ops", &OPERATOR, None).await.body;
            let shown = strip_of(&page);
            shown.iter().any(|(_, i)| i == "replica-c") && expected.is_subset(&shown)
        },
    )
    .await;

    // The job's own page: settings, the history newest first, the processes at the store.
    let job_page = format!("/ops/jobs/{JOB_IN_URL}");
    let reply = request(addr, "GET", &job_page, &OPERATOR, None).await;
    assert_eq!(reply.code, 200, "{}", reply.body);
    let page = reply.body;
    assert!(page.contains("<code>every 1s</code>"), "{page}");
    let rows = history_rows_of(&page);
    for fire in &before {
        assert!(rows.contains(fire), "{fire:?} in {rows:?}");
    }
    let mut newest_first = rows.clone();
    newest_first.sort_by(|x, y| y.0.cmp(&x.0));
    assert_eq!(rows, newest_first, "newest first");
    assert!(page.contains(r#"<tr data-instance="replica-c">"#), "{page}");
    assert!(page.contains(r#"data-live="true""#), "{page}");
    assert!(page.contains(r#"href="../../ops""#), "{page}");
    assert_eq!(
        request(addr, "GET", "/ops/jobs/nope", &OPERATOR, None)
            .await
            .code,
        404
    );

    // Reads need a token; the viewer's POST is refused, the operator's carried out.
    let anonymous = request(addr, "GET", "/ops", &[], None).await;
    assert_eq!(anonymous.code, 401);
    assert!(anonymous.header("www-authenticate").is_some());
    let wrong = [("authorization", "Bearer nope")];
    assert_eq!(request(addr, "GET", "/ops", &wrong, None).await.code, 403);
    assert_eq!(request(addr, "GET", &job_page, &[], None).await.code, 401);
    let form = format!("job={}", enc(JOB));
    assert_eq!(
        request(addr, "POST", "/ops/pause", &VIEWER, Some(&form))
            .await
            .code,
        403
    );
    assert!(reader.jobs().await.expect("jobs")[0].paused.is_none());
    // HTTP Basic, as a browser sends it: `alice <ops>:op-token`; the user name is who paused.
    let basic = [("authorization", "Basic YWxpY2UgPG9wcz46b3AtdG9rZW4=")];
    let reply = request(addr, "POST", "/ops/pause", &basic, Some(&form)).await;
    assert_eq!(reply.code, 303, "{}", reply.body);
    assert_eq!(reply.header("location"), Some("../ops"));
    let paused = reader.jobs().await.expect("jobs")[0]
        .paused
        .clone()
        .expect("paused through the store");
    assert_eq!(paused.by, "alice <ops>");
    let page = request(addr, "GET", "/ops", &OPERATOR, None).await.body;
    assert!(page.contains(r#"data-state="paused""#), "{page}");
    assert!(
        page.contains("paused by alice &lt;ops&gt;"),
        "escaped: {page}"
    );
    assert!(!page.contains("<ops>"), "{page}");
    // From the job's page, back to it.
    let reply = request(
        addr,
        "POST",
        "/ops/resume",
        &OPERATOR,
        Some(&format!("{form}&back=job")),
    )
    .await;
    assert_eq!(reply.code, 303, "{}", reply.body);
    assert_eq!(
        reply.header("location"),
        Some(format!("jobs/{JOB_IN_URL}").as_str())
    );
    assert!(reader.jobs().await.expect("jobs")[0].paused.is_none());

    // No live replica: run now is off on the job's page, and a POST is refused with the reason.
    c.shutdown().await;
    eventually(
        "no live replica on the job's page",
        Duration::from_secs(20),
        || async {
            let page = request(addr, "GET", &job_page, &OPERATOR, None).await.body;
            page.contains(r#"data-live="false""#) && page.contains(r#"id="run-off""#)
        },
    )
    .await;
    let reply = request(addr, "POST", "/ops/run", &OPERATOR, Some(&form)).await;
    assert_eq!(reply.code, 409, "{}", reply.body);
    assert!(reply.body.contains("no live replica"), "{}", reply.body);
    assert!(reply.body.contains(r#"id="refusal""#), "{}", reply.body);
}
