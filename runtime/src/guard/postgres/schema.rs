//! The `postgres` guard's tables and functions: their SQL, and the check at start that what is in
//! the database is what this version expects. The SQL is `schema.sql`, which the book prints for
//! teams that run migrations themselves (`docs/operations/postgres.md`).

use tokio_postgres::types::Type;
use tokio_postgres::GenericClient;

use crate::guard::GuardError;

/// The tables, indexes and functions in schema `{schema}`. Every statement is idempotent.
///
/// - `jobs`: one row per job. `last_fire` is the last claimed fire, `fence` its fencing token,
///   `holder` the token of the claimant of `last_fire`; the lease is `lease_holder` until
///   `lease_until` (the database clock); `cancel_holder` names a holder another replica asked to
///   stop (`overlap = "replace"`); `lapsed` a last claimed fire given up unstarted;
///   `recent_fires`/`recent_tokens` the last eight claims, so that a retried claim is recognised
///   and a passed-over fire told apart from one that ran; `paused_at`/`paused_by` the job's pause
///   (none while both are null); `manual_run_ids`/`manual_run_tokens`/`manual_run_requested`
///   the manual runs claimed (id in hex, claimant's token, when it was asked for), kept apart from
///   the scheduled fires for as long as a claim of them could be granted (the job's misfire
///   grace from the request, by the database clock), and `manual_forgotten` the newest request
///   forgotten since; `manual_ids`/`manual_tokens` the last eight manual runs as
///   `claim_manual_v1` of an earlier version keeps them; `reported_through` the newest
///   fire reported dropped and `missed_through` the newest reported missed (not those after
///   `missed_before` up to `missed_from`, the fate point the newest were recorded from), which with
///   `last_fire` make the job's fate point (columns, unlike the rows of `reports`, so that they
///   are kept past an hour); `abandoned` the tokens of the newest eight claims given up
///   before they arrived, which are then refused.
/// - `reports`: who first reported each dropped fire (rows older than an hour are deleted).
/// - `missed_answers`: the fate point each report of missed fires was answered, by reporter and
///   last fire, so that a retry is answered as its first try (rows older than an hour are
///   deleted).
/// - `runs`: the run history, when enabled: one row per claimed run, and one per dropped fire.
/// - `controls`: the control feed (pause, resume, run now), read by every replica; rows older
///   than seven days are deleted when a request is published.
/// - `roster`: the jobs the replicas run, one row per job, as the last replica announced it;
///   `due_grace_ms` its misfire grace plus its jitter, for the command-line tool's health check
///   (null where a replica of an earlier version announced it).
/// - `processes`: the processes present, one row per process id, `seen` when it last attended
///   (the database clock); rows not seen for the presence time are deleted by the next attend.
/// - `partition_members`, `partitions`: partition ownership (docs/design/ownership.md): the
///   processes of each group as `processes` keeps them, and each partition's lease — `owner`,
///   `epoch` (rises on every change of owner), `expires` (the database clock) and `alive_ms`
///   (the owner's own clock, Unix ms, when it sent its last renewal).
const CREATE: &str = include_str!("schema.sql");

/// Every column of the tables with its type as `information_schema.columns` names it.
const COLUMNS: &[(&str, &str, &str)] = &[
    ("jobs", "job", "text"),
    ("jobs", "last_fire", "timestamp with time zone"),
    ("jobs", "fence", "bigint"),
    ("jobs", "holder", "text"),
    ("jobs", "lease_holder", "text"),
    ("jobs", "lease_until", "timestamp with time zone"),
    ("jobs", "cancel_holder", "text"),
    ("jobs", "lapsed", "timestamp with time zone"),
    ("jobs", "recent_fires", "ARRAY"),
    ("jobs", "recent_tokens", "ARRAY"),
    ("jobs", "paused_at", "timestamp with time zone"),
    ("jobs", "paused_by", "text"),
    ("jobs", "manual_ids", "ARRAY"),
    ("jobs", "manual_tokens", "ARRAY"),
    ("jobs", "manual_run_ids", "ARRAY"),
    ("jobs", "manual_run_tokens", "ARRAY"),
    ("jobs", "manual_run_requested", "ARRAY"),
    ("jobs", "manual_forgotten", "timestamp with time zone"),
    ("jobs", "reported_through", "timestamp with time zone"),
    ("jobs", "missed_through", "timestamp with time zone"),
    ("jobs", "claims_made", "bigint"),
    ("jobs", "missed_from", "timestamp with time zone"),
    ("jobs", "missed_before", "timestamp with time zone"),
    ("jobs", "abandoned", "ARRAY"),
    ("reports", "job", "text"),
    ("reports", "fire", "timestamp with time zone"),
    ("reports", "reporter", "text"),
    ("reports", "reported_at", "timestamp with time zone"),
    ("missed_answers", "job", "text"),
    ("missed_answers", "reporter", "text"),
    ("missed_answers", "last_fire", "timestamp with time zone"),
    ("missed_answers", "answer", "timestamp with time zone"),
    ("missed_answers", "reported_at", "timestamp with time zone"),
    ("runs", "id", "bigint"),
    ("runs", "job", "text"),
    ("runs", "fire", "timestamp with time zone"),
    ("runs", "instance", "text"),
    ("runs", "fence", "bigint"),
    ("runs", "started", "timestamp with time zone"),
    ("runs", "ended", "timestamp with time zone"),
    ("runs", "outcome", "text"),
    ("runs", "error", "text"),
    ("runs", "lateness_ms", "bigint"),
    ("controls", "id", "bigint"),
    ("controls", "job", "text"),
    ("controls", "action", "text"),
    ("controls", "argument", "text"),
    ("controls", "at", "timestamp with time zone"),
    ("roster", "job", "text"),
    ("roster", "schedule", "text"),
    ("roster", "instance", "text"),
    ("roster", "at", "timestamp with time zone"),
    ("roster", "due_grace_ms", "bigint"),
    ("processes", "process", "text"),
    ("processes", "seen", "timestamp with time zone"),
    ("partition_members", "grp", "text"),
    ("partition_members", "process", "text"),
    ("partition_members", "seen", "timestamp with time zone"),
    ("partitions", "grp", "text"),
    ("partitions", "part", "integer"),
    ("partitions", "owner", "text"),
    ("partitions", "epoch", "bigint"),
    ("partitions", "expires", "timestamp with time zone"),
    ("partitions", "alive_ms", "bigint"),
];

/// Columns added to a table after its first release: a table without them is cronguard's, made
/// by an earlier version, and gets them from the `ALTER TABLE` of [`CREATE`].
const ADDED_COLUMNS: &[(&str, &str)] = &[
    ("roster", "due_grace_ms"),
    ("jobs", "paused_at"),
    ("jobs", "paused_by"),
    ("jobs", "manual_ids"),
    ("jobs", "manual_tokens"),
    ("jobs", "manual_run_ids"),
    ("jobs", "manual_run_tokens"),
    ("jobs", "manual_run_requested"),
    ("jobs", "manual_forgotten"),
    ("jobs", "reported_through"),
    ("jobs", "missed_through"),
    ("jobs", "claims_made"),
    ("jobs", "missed_from"),
    ("jobs", "missed_before"),
    ("jobs", "abandoned"),
];

const TABLES: &[&str] = &[
    "jobs",
    "reports",
    "missed_answers",
    "runs",
    "controls",
    "roster",
    "processes",
    "partition_members",
    "partitions",
];
/// Every function with the revision of its body (the line `-- revision N` that begins it in
/// [`CREATE`]). A body changed in place gets the next revision, and must keep every answer that
/// the callers of earlier revisions understand; a change they would not understand is a function
/// of a new name (`claim_v6`).
const FUNCTIONS: &[(&str, u32)] = &[
    ("claim_v1", 1),
    ("claim_v2", 1),
    ("claim_v3", 1),
    ("claim_v4", 1),
    ("claim_v5", 1),
    ("first_report_v1", 1),
    ("first_report_v2", 1),
    ("report_missed_v1", 1),
    ("report_missed_v2", 1),
    ("report_missed_v3", 1),
    ("fate_point_v1", 1),
    ("claim_manual_v1", 1),
    ("claim_manual_v2", 1),
    ("abandon_v1", 1),
    ("renew_v1", 1),
    ("release_v1", 1),
];

/// The SQL that creates the schema `schema` (what [`ensure`] runs when something is missing).
pub(crate) fn create_sql(schema: &str) -> String {
    CREATE.replace("{schema}", schema)
}

/// Whether `name` may be used as the schema: a plain lower-case SQL identifier, so that it needs
/// no quoting and cannot smuggle SQL into the statements it is formatted into.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    if first_ok
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        Ok(())
    } else {
        Err(format!(
            "the PostgreSQL schema name `{name}` is not a plain identifier; use lower-case letters, digits and `_` (at most 63, not starting with a digit)"
        ))
    }
}

/// What the database holds in the schema, as [`inspect`] found it.
struct Found {
    /// Every table is there with every column this version uses.
    tables_complete: bool,
    /// Functions this version calls that are not there.
    missing: Vec<&'static str>,
    /// Functions of an older revision than this version's (an earlier version wrote them).
    older: Vec<&'static str>,
    /// Functions of a newer revision than this version's (a later version wrote them).
    newer: Vec<&'static str>,
}

impl Found {
    /// Whether this version can run on the schema as it is, and writes nothing.
    fn ready(&self) -> bool {
        self.tables_complete && self.missing.is_empty() && self.older.is_empty()
    }
}

/// The revision a function's body says it is (its line `-- revision N`); `0` for a body written
/// before functions carried one.
fn revision_of(body: &str) -> u32 {
    body.lines()
        .find_map(|line| line.trim().strip_prefix("-- revision "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// What the schema holds; `Err` when a table exists but is not cronguard's.
async fn inspect<C: GenericClient + Sync>(client: &C, schema: &str) -> Result<Found, SchemaError> {
    let rows = client
        .query_typed(
            "SELECT table_name::text, column_name::text, data_type::text \
             FROM information_schema.columns WHERE table_schema = $1",
            &[(&schema, Type::TEXT)],
        )
        .await
        .map_err(|e| store(&e))?;
    let found = rows
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
        .collect::<Result<Vec<(String, String, String)>, tokio_postgres::Error>>()
        .map_err(|e| store(&e))?;
    let mut tables_complete = true;
    for table in TABLES {
        let present: Vec<&(String, String, String)> =
            found.iter().filter(|(t, ..)| t == table).collect();
        if present.is_empty() {
            tables_complete = false;
            continue;
        }
        let expected: Vec<&(&str, &str, &str)> =
            COLUMNS.iter().filter(|(t, ..)| t == table).collect();
        for (_, column, ty) in &expected {
            match present.iter().find(|(_, c, _)| c == column) {
                None if ADDED_COLUMNS.contains(&(*table, *column)) => tables_complete = false,
                None => {
                    return Err(unrecognised(
                        schema,
                        table,
                        &format!("it has no column `{column}`"),
                    ))
                }
                Some((_, _, found_ty)) if found_ty != ty => {
                    return Err(unrecognised(
                        schema,
                        table,
                        &format!("its column `{column}` is `{found_ty}`, not `{ty}`"),
                    ))
                }
                Some(_) => {}
            }
        }
        // Columns beyond these are left alone: a later version of cronguard added them, and
        // this one (during a rolling deploy or a rollback) must still run beside it.
    }
    let names: Vec<&str> = FUNCTIONS.iter().map(|(name, _)| *name).collect();
    let rows = client
        .query_typed(
            "SELECT p.proname::text, p.prosrc FROM pg_proc p \
             JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = $1 AND p.proname = ANY ($2)",
            &[(&schema, Type::TEXT), (&names, Type::TEXT_ARRAY)],
        )
        .await
        .map_err(|e| store(&e))?;
    let bodies = rows
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect::<Result<Vec<(String, String)>, tokio_postgres::Error>>()
        .map_err(|e| store(&e))?;
    let mut found = Found {
        tables_complete,
        missing: Vec::new(),
        older: Vec::new(),
        newer: Vec::new(),
    };
    for (name, revision) in FUNCTIONS {
        let revisions = bodies
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, body)| revision_of(body));
        match revisions.min() {
            None => found.missing.push(name),
            Some(r) if r < *revision => found.older.push(name),
            Some(r) if r > *revision => found.newer.push(name),
            Some(_) => {}
        }
    }
    Ok(found)
}

/// How many functions this version keeps in the schema.
#[cfg(test)]
pub(crate) fn function_count() -> i64 {
    FUNCTIONS.len() as i64
}

/// Why the schema could not be made ready.
pub(crate) enum SchemaError {
    /// A table exists but is not the one this version uses: cronguard does not touch it.
    Foreign(String),
    /// The database failed or refused a statement.
    Store(GuardError),
}

impl SchemaError {
    /// The failure as a guard's, for a statement that found the schema wanting.
    pub(crate) fn into_guard_error(self) -> GuardError {
        match self {
            SchemaError::Foreign(text) => GuardError::invalid(text),
            SchemaError::Store(e) => e,
        }
    }
}

fn store(e: &tokio_postgres::Error) -> SchemaError {
    SchemaError::Store(GuardError::new(super::kind_of(e), super::describe(e)))
}

fn unrecognised(schema: &str, table: &str, why: &str) -> SchemaError {
    SchemaError::Foreign(format!(
        "the table `{schema}.{table}` exists but is not the one this version of cronguard uses ({why}); cronguard never alters a table it does not recognise: set another schema with `CRONGUARD_POSTGRES_SCHEMA` (or `Builder::postgres_schema`), or drop the table if it is an old cronguard table"
    ))
}

/// Makes sure schema `schema` holds cronguard's tables and functions: nothing is written when
/// everything is there (a role without `CREATE` can run against tables made by a migration);
/// what is missing, and functions of an older revision, are created in one transaction; a table
/// that is not cronguard's is an error. Functions of a newer revision are left alone.
pub(crate) async fn ensure(
    client: &mut tokio_postgres::Client,
    schema: &str,
) -> Result<(), SchemaError> {
    if inspect(&*client, schema).await?.ready() {
        return Ok(());
    }
    let tx = client.transaction().await.map_err(|e| store(&e))?;
    // Replicas starting together would race on `CREATE ... IF NOT EXISTS` (it is not atomic in
    // the catalog); a transaction-level lock, released at commit, orders them. It is taken only
    // here, never for claims.
    tx.batch_execute("SELECT pg_advisory_xact_lock(hashtext('cronguard schema'))")
        .await
        .map_err(|e| store(&e))?;
    // Read again under the lock: a replica that held it may have done the work meanwhile.
    let found = inspect(&tx, schema).await?;
    if found.ready() {
        return tx.commit().await.map_err(|e| store(&e));
    }
    if !found.newer.is_empty() {
        // A later version wrote some functions: this one's bodies would take its changes away.
        if !found.tables_complete || !found.missing.is_empty() {
            return Err(SchemaError::Foreign(format!(
                "schema `{schema}` holds functions of a later version of cronguard ({}) but lacks {} that this version uses; start the later version once (it creates them) or apply its `schema.sql` (docs/operations/postgres.md#schema)",
                found.newer.join(", "),
                if found.missing.is_empty() {
                    "tables".to_owned()
                } else {
                    found.missing.join(", ")
                }
            )));
        }
        tracing::warn!(
            schema,
            older = %found.older.join(", "),
            newer = %found.newer.join(", "),
            "some of cronguard's functions are of an older revision and some of a newer one than this version's: a later version of cronguard runs beside this one; it brings them up to date when it starts next, and this version leaves them alone"
        );
        return tx.commit().await.map_err(|e| store(&e));
    }
    tx.batch_execute(&create_sql(schema))
        .await
        .map_err(|e| SchemaError::Store(GuardError::new(super::kind_of(&e), format!("cannot create or update cronguard's tables and functions in schema `{schema}`: {}; give the role `CREATE` on the database (and ownership of the functions), or apply the SQL of `schema.sql` of this version (docs/operations/postgres.md#schema)", super::describe(&e)))))?;
    tx.commit().await.map_err(|e| store(&e))?;
    if !found.older.is_empty() {
        tracing::info!(
            schema,
            functions = %found.older.join(", "),
            "brought cronguard's functions of an earlier version up to this version's revision"
        );
    }
    if inspect(&*client, schema).await?.ready() {
        Ok(())
    } else {
        Err(SchemaError::Foreign(format!(
            "schema `{schema}` still lacks cronguard's tables or functions after creating them"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_identifiers_are_schema_names() {
        for ok in ["cronguard", "_x", "jobs_2", &"a".repeat(63)] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Cronguard",
            "2x",
            "a;drop table x",
            "a b",
            "\"q\"",
            &"a".repeat(64),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_column_of_the_sql_is_checked() {
        let sql = create_sql("s");
        for (table, column, _) in COLUMNS {
            assert!(sql.contains(&format!("CREATE TABLE IF NOT EXISTS s.{table}")));
            assert!(sql.contains(&format!("  {column} ")), "{column}");
        }
    }

    /// The body of function `name` in `sql`: the text between its dollar quotes.
    fn body<'a>(sql: &'a str, name: &str) -> &'a str {
        let header = format!("FUNCTION cronguard.{name}(");
        let at = sql
            .find(&header)
            .unwrap_or_else(|| panic!("{name} is in the SQL"));
        let after = &sql[at..];
        let open = after.find(" AS $").expect("a dollar-quoted body") + 4;
        let tag_len = after[open + 1..].find('$').expect("a closed tag") + 2;
        let tag = &after[open..open + tag_len];
        let body = &after[open + tag_len..];
        &body[..body.find(tag).expect("the body ends")]
    }

    #[test]
    fn every_function_is_in_the_sql_with_its_revision() {
        let sql = create_sql("cronguard");
        for (function, revision) in FUNCTIONS {
            let body = body(&sql, function);
            assert_eq!(
                body.trim_start().lines().next(),
                Some(format!("-- revision {revision}").as_str()),
                "{function} begins with its revision"
            );
            assert_eq!(revision_of(body), *revision, "{function}");
        }
    }

    #[test]
    fn a_body_without_a_revision_is_revision_zero() {
        assert_eq!(revision_of("\nDECLARE x int;\nBEGIN END\n"), 0);
        assert_eq!(revision_of("\n-- revision 12\n  SELECT 1\n"), 12);
        assert_eq!(revision_of("\n-- revision x\n"), 0);
    }
}
