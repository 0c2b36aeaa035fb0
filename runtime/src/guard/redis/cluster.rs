//! Redis Cluster: `redis+cluster://[user:password@]host1:port1,host2:port2,...[/]`.
//!
//! Any one node is enough as a seed; the client learns the others from it. Every key of a job
//! carries the hash tag `{<job>}`, so a job's keys live in one slot and its scripts run on the
//! primary that owns that slot (the cluster client routes `EVALSHA` by its first key, loads a
//! script on every primary after `NOSCRIPT`, and follows `MOVED`, `ASK` and `TRYAGAIN` — in a
//! pipeline too — and failovers).

use std::time::Duration;

use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::{Cmd, ErrorKind, Pipeline, RedisError, Value};

use super::failure::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT};

/// The scheme of a cluster URL.
pub(crate) const SCHEME: &str = "redis+cluster://";

/// A cluster URL's seed nodes, as `redis://` URLs the client understands.
pub(crate) fn seeds(url: &str) -> Result<Vec<String>, String> {
    let rest = url.strip_prefix(SCHEME).ok_or_else(|| {
        format!("a Redis Cluster URL starts with `{SCHEME}` (`{SCHEME}host1:port1,host2:port2`)")
    })?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (credentials, hosts) = match rest.rsplit_once('@') {
        Some((credentials, hosts)) => (Some(credentials), hosts),
        None => (None, rest),
    };
    if hosts.contains('/') || hosts.contains('?') {
        return Err(format!(
            "a Redis Cluster URL names no database and no options: `{SCHEME}[user:password@]host1:port1,host2:port2`; a cluster has only database 0"
        ));
    }
    let mut seeds = Vec::new();
    for node in hosts.split(',').map(str::trim) {
        let (host, port) = node.rsplit_once(':').ok_or_else(|| {
            format!("the cluster node `{node}` has no port; write each node as `host:port`, separated by commas")
        })?;
        if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(format!(
                "the cluster node `{node}` is not `host:port` with a port from 1 to 65535"
            ));
        }
        seeds.push(match credentials {
            Some(credentials) => format!("redis://{credentials}@{host}:{port}/"),
            None => format!("redis://{host}:{port}/"),
        });
    }
    Ok(seeds)
}

/// The cluster client of `url`.
pub(crate) fn client(url: &str) -> Result<redis::cluster::ClusterClient, String> {
    let seeds = seeds(url)?;
    ClusterClientBuilder::new(seeds)
        .connection_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        // A failover takes the cluster about its node timeout plus an election; the request is
        // retried (MOVED, ASK, TRYAGAIN, a lost connection) within the response timeout, and
        // after that the job's model retries the claim until the fire's grace runs out.
        .retries(6)
        .min_retry_wait(50)
        .max_retry_wait(500)
        .build()
        .map_err(|e| format!("the Redis Cluster URL is not valid: {e}"))
}

/// Connects to the cluster and checks that it answers.
pub(crate) async fn connect(
    client: &redis::cluster::ClusterClient,
) -> Result<ClusterConnection, RedisError> {
    let mut conn = tokio::time::timeout(
        CONNECT_TIMEOUT + Duration::from_secs(1),
        client.get_async_connection(),
    )
    .await
    .map_err(|_| {
        RedisError::from((
            ErrorKind::Io,
            "no answer from the cluster",
            format!("within {CONNECT_TIMEOUT:?}"),
        ))
    })??;
    let _: String = redis::cmd("PING").query_async(&mut conn).await?;
    Ok(conn)
}

/// `items` in groups whose keys (`key` of each) share one slot, in their order: a script's keys
/// must all hash to one slot on a cluster (on one node is not enough).
pub(crate) fn group_by_slot<T>(items: Vec<T>, key: impl Fn(&T) -> &str) -> Vec<Vec<T>> {
    let mut groups: Vec<(Slot, Vec<T>)> = Vec::new();
    for item in items {
        let slot = Slot::for_key(key(&item));
        match groups.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, group)) => group.push(item),
            None => groups.push((slot, vec![item])),
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}

/// The primary that owns `key`'s slot.
pub(crate) fn primary_of(key: &str) -> SingleNodeRoutingInfo {
    SingleNodeRoutingInfo::SpecificNode(Route::with_key(key, SlotAddr::Master))
}

/// Sends `cmd` to the primary of `key`'s slot (for commands without keys, such as `TIME`).
pub(crate) async fn on_primary_of(
    conn: &mut ClusterConnection,
    key: &str,
    cmd: &Cmd,
) -> Result<Value, RedisError> {
    conn.route_command(cmd.clone(), RoutingInfo::SingleNode(primary_of(key)))
        .await
}

/// Sends `pipeline` to one node; its commands' errors come back as values.
pub(crate) async fn pipeline_to(
    conn: &mut ClusterConnection,
    pipeline: &Pipeline,
    route: SingleNodeRoutingInfo,
) -> Result<Vec<Value>, RedisError> {
    conn.route_pipeline(pipeline.clone(), 0, pipeline.len(), route)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_url_names_its_seed_nodes() {
        assert_eq!(
            seeds("redis+cluster://127.0.0.1:7000,127.0.0.1:7001/").as_deref(),
            Ok(&[
                "redis://127.0.0.1:7000/".to_owned(),
                "redis://127.0.0.1:7001/".to_owned()
            ][..])
        );
        assert_eq!(
            seeds("redis+cluster://app:s3cret@127.0.0.1:7000").as_deref(),
            Ok(&["redis://app:s3cret@127.0.0.1:7000/".to_owned()][..])
        );
        for (bad, says) in [
            ("redis+cluster://127.0.0.1", "has no port"),
            ("redis+cluster://127.0.0.1:7000,", "has no port"),
            ("redis+cluster://127.0.0.1:0", "from 1 to 65535"),
            ("redis+cluster://127.0.0.1:x", "from 1 to 65535"),
            ("redis+cluster://127.0.0.1:7000/2", "no database"),
        ] {
            let err = seeds(bad).expect_err(bad);
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
