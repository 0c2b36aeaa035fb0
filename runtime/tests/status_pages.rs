//! The status of many jobs, page by page: every job once, sorted by name, without copying them
//! all; one job by name.

use std::time::Duration;

use cronguard::{Job, Schedule};

#[tokio::test]
async fn pages_list_every_job_once_in_name_order() {
    const JOBS: usize = 250;
    let schedule = Schedule::every(Duration::from_secs(3600)).expect("valid");
    // Names in an order unlike their sort order, spread over the shards.
    let jobs = (0..JOBS).rev().map(|i| {
        Job::new(format!("job-{:03}", (i * 7) % JOBS), schedule.clone()).run(|_| async {})
    });
    let handle = cronguard::builder()
        .registered_jobs(false)
        .jobs(jobs)
        .start()
        .await
        .expect("starts");
    assert_eq!(handle.monitor().job_count(), JOBS);

    let mut names = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = handle.monitor().jobs_page(after.as_deref(), 100);
        pages += 1;
        assert!(page.jobs.len() <= 100);
        names.extend(page.jobs.iter().map(|j| j.name.clone()));
        match page.next {
            Some(next) => {
                assert_eq!(Some(&next), names.last(), "`next` is the page's last name");
                after = Some(next);
            }
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = (0..JOBS).map(|i| format!("job-{i:03}")).collect();
    assert_eq!(names, expected);
    assert!(handle
        .monitor()
        .jobs_page(Some("job-249"), 100)
        .jobs
        .is_empty());
    assert_eq!(handle.monitor().jobs_page(None, 0).jobs.len(), 0);

    let one = handle.monitor().job("job-123").expect("found");
    assert_eq!(one.name, "job-123");
    assert!(handle.monitor().job("job-999").is_none());
    handle.shutdown().await;
}
