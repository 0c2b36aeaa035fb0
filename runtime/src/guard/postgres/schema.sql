CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.jobs (
  job            text PRIMARY KEY,
  last_fire      timestamptz,
  fence          bigint NOT NULL DEFAULT 0,
  holder         text,
  lease_holder   text,
  lease_until    timestamptz,
  cancel_holder  text,
  lapsed         timestamptz,
  recent_fires   timestamptz[] NOT NULL DEFAULT '{}',
  recent_tokens  text[] NOT NULL DEFAULT '{}',
  paused_at      timestamptz,
  paused_by      text,
  manual_ids     text[] NOT NULL DEFAULT '{}',
  manual_tokens  text[] NOT NULL DEFAULT '{}',
  manual_run_ids        text[] NOT NULL DEFAULT '{}',
  manual_run_tokens     text[] NOT NULL DEFAULT '{}',
  manual_run_requested  timestamptz[] NOT NULL DEFAULT '{}',
  manual_forgotten      timestamptz,
  reported_through  timestamptz,
  missed_through    timestamptz,
  claims_made       bigint DEFAULT 0,
  missed_from       timestamptz,
  missed_before     timestamptz,
  abandoned         text[] NOT NULL DEFAULT '{}'
);
-- Added after the first release of the table: a table made before gets them here.
ALTER TABLE {schema}.jobs
  ADD COLUMN IF NOT EXISTS paused_at timestamptz,
  ADD COLUMN IF NOT EXISTS paused_by text,
  ADD COLUMN IF NOT EXISTS manual_ids text[] NOT NULL DEFAULT '{}',
  ADD COLUMN IF NOT EXISTS manual_tokens text[] NOT NULL DEFAULT '{}',
  ADD COLUMN IF NOT EXISTS manual_run_ids text[] NOT NULL DEFAULT '{}',
  ADD COLUMN IF NOT EXISTS manual_run_tokens text[] NOT NULL DEFAULT '{}',
  ADD COLUMN IF NOT EXISTS manual_run_requested timestamptz[] NOT NULL DEFAULT '{}',
  ADD COLUMN IF NOT EXISTS manual_forgotten timestamptz,
  ADD COLUMN IF NOT EXISTS reported_through timestamptz,
  ADD COLUMN IF NOT EXISTS missed_through timestamptz,
  -- How many claims were ever made, while known: NULL for a row made before the column (its
  -- count is unknown), so that the recent claims are taken for all the claims only when they are.
  ADD COLUMN IF NOT EXISTS claims_made bigint;
ALTER TABLE {schema}.jobs ALTER COLUMN claims_made SET DEFAULT 0;
-- The fate point when the newest missed fires were recorded, and the newest missed fire before
-- them: the fires between were not reported missed (NULL: every fire up to missed_through was).
ALTER TABLE {schema}.jobs ADD COLUMN IF NOT EXISTS missed_from timestamptz,
  ADD COLUMN IF NOT EXISTS missed_before timestamptz;
-- The tokens of the newest eight claims given up (abandon_v1) before they reached the database (a
-- claim sent on one pooled connection may arrive after its abandon sent on another): refused.
ALTER TABLE {schema}.jobs ADD COLUMN IF NOT EXISTS abandoned text[] NOT NULL DEFAULT '{}';
CREATE TABLE IF NOT EXISTS {schema}.reports (
  job          text NOT NULL,
  fire         timestamptz NOT NULL,
  reporter     text NOT NULL,
  reported_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (job, fire)
);
-- The fate point each report of missed fires (report_missed_v2) was answered, by reporter and
-- last fire, so that a retry whose first try took effect unheard is answered the same (rows older
-- than an hour are deleted).
CREATE TABLE IF NOT EXISTS {schema}.missed_answers (
  job          text NOT NULL,
  reporter     text NOT NULL,
  last_fire    timestamptz NOT NULL,
  answer       timestamptz,
  reported_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (job, reporter, last_fire)
);
CREATE TABLE IF NOT EXISTS {schema}.runs (
  id           bigserial PRIMARY KEY,
  job          text NOT NULL,
  fire         timestamptz NOT NULL,
  instance     text NOT NULL,
  fence        bigint,
  started      timestamptz,
  ended        timestamptz,
  outcome      text NOT NULL,
  error        text,
  lateness_ms  bigint
);
CREATE INDEX IF NOT EXISTS runs_job_fire ON {schema}.runs (job, fire);
CREATE INDEX IF NOT EXISTS runs_running ON {schema}.runs (job) WHERE outcome = 'running';
CREATE INDEX IF NOT EXISTS runs_fire ON {schema}.runs (fire);
CREATE TABLE IF NOT EXISTS {schema}.controls (
  id        bigserial PRIMARY KEY,
  job       text NOT NULL,
  action    text NOT NULL,
  argument  text NOT NULL,
  at        timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS controls_at ON {schema}.controls (at);
CREATE TABLE IF NOT EXISTS {schema}.roster (
  job           text PRIMARY KEY,
  schedule      text NOT NULL,
  instance      text NOT NULL,
  at            timestamptz NOT NULL,
  due_grace_ms  bigint
);
-- Added after the first release of the table: a table made before gets it here.
ALTER TABLE {schema}.roster ADD COLUMN IF NOT EXISTS due_grace_ms bigint;
CREATE TABLE IF NOT EXISTS {schema}.processes (
  process   text PRIMARY KEY,
  seen      timestamptz NOT NULL
);
-- Partition ownership (docs/design/ownership.md): the processes of each group, and the lease of
-- each of its partitions.
CREATE TABLE IF NOT EXISTS {schema}.partition_members (
  grp       text NOT NULL,
  process   text NOT NULL,
  seen      timestamptz NOT NULL,
  PRIMARY KEY (grp, process)
);
CREATE TABLE IF NOT EXISTS {schema}.partitions (
  grp       text NOT NULL,
  part      integer NOT NULL,
  owner     text NOT NULL,
  epoch     bigint NOT NULL,
  expires   timestamptz NOT NULL,
  alive_ms  bigint NOT NULL,
  PRIMARY KEY (grp, part)
);

-- Each function's body begins with its revision. A start of cronguard replaces the functions when
-- one is missing or older than its own revision, and leaves them alone when one is newer (a later
-- version runs beside this one): a body changed in place keeps every answer that the callers of
-- earlier revisions understand; a change they would not understand is a function of a new name.
CREATE OR REPLACE FUNCTION {schema}.claim_v5(
  p_job text, p_fire timestamptz, p_token text, p_lease_ms bigint, p_replace boolean,
  p_skip boolean, p_nonce text, p_tolerance_ms bigint, p_instance text, p_history boolean,
  OUT answer integer, OUT val bigint, OUT ignored boolean, OUT paused_at timestamptz,
  OUT paused_by text)
LANGUAGE plpgsql AS $claim$
-- revision 1
DECLARE
  v_now timestamptz := clock_timestamp();
  v_tolerance interval := p_tolerance_ms * interval '1 millisecond';
  r {schema}.jobs%ROWTYPE;
  v_last timestamptz;
  v_claimed_by text;
  v_oldest timestamptz;
  v_held boolean;
  v_fence bigint;
  v_reporter text;
  v_missed boolean := false;
BEGIN
  answer := 0; val := 0; ignored := false;
  IF p_fire > v_now + v_tolerance THEN
    answer := 4;
    val := floor(extract(epoch FROM p_fire - v_now) * 1000);
    RETURN;
  END IF;
  SELECT * INTO r FROM {schema}.jobs WHERE job = p_job FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO {schema}.jobs (job) VALUES (p_job) ON CONFLICT (job) DO NOTHING;
    SELECT * INTO r FROM {schema}.jobs WHERE job = p_job FOR UPDATE;
  END IF;
  -- Its claimant gave this claim up before it arrived (abandon_v1): it takes nothing, as one
  -- whose lease ran out.
  IF p_token = ANY (r.abandoned) THEN
    answer := 3;
    RETURN;
  END IF;
  v_last := r.last_fire;
  IF v_last > v_now + v_tolerance THEN
    v_last := NULL;
    ignored := true;
  END IF;
  -- An older fire's claimant is looked up in the recent claims also when the last claim lies far
  -- ahead of the database's clock and is ignored (the clock was set back, or a failover went to a
  -- server whose clock is behind): the fires they remember were claimed.
  IF v_last = p_fire THEN
    v_claimed_by := r.holder;
  ELSIF r.last_fire > p_fire THEN
    FOR i IN 1 .. coalesce(cardinality(r.recent_fires), 0) LOOP
      IF r.recent_fires[i] = p_fire THEN
        v_claimed_by := r.recent_tokens[i];
      END IF;
      IF v_oldest IS NULL OR r.recent_fires[i] < v_oldest THEN
        v_oldest := r.recent_fires[i];
      END IF;
    END LOOP;
  END IF;
  v_held := r.lease_holder IS NOT NULL AND r.lease_until > v_now;
  IF v_claimed_by = p_token THEN
    IF NOT v_held OR r.lease_holder <> p_token THEN
      IF v_last = p_fire THEN
        UPDATE {schema}.jobs SET lapsed = p_fire WHERE job = p_job;
      END IF;
      answer := 3;
      RETURN;
    END IF;
    UPDATE {schema}.jobs SET lease_until = v_now + p_lease_ms * interval '1 millisecond'
      WHERE job = p_job;
    answer := 2;
    val := r.fence;
    RETURN;
  END IF;
  -- A fire reported missed (report_missed_v1) that nobody claimed does not run and is not
  -- reported again, unless the claimant reported it dropped itself (a busy answer it never got):
  -- then that report came first.
  IF p_fire <= r.missed_through
     AND (r.missed_from IS NULL OR p_fire > r.missed_from OR p_fire <= r.missed_before) THEN
    v_missed := NOT EXISTS (SELECT 1 FROM {schema}.reports
                            WHERE job = p_job AND fire = p_fire AND reporter = p_nonce);
  END IF;
  IF v_claimed_by IS NOT NULL THEN
    -- Another claimant's claim took this very fire.
    answer := 7;
    RETURN;
  END IF;
  -- With the last claim ignored, a fire older than every claim remembered is past, as below.
  IF ignored AND v_oldest IS NOT NULL AND p_fire < v_oldest
     AND coalesce(cardinality(r.recent_fires), 0) >= 8 THEN
    RETURN;
  END IF;
  IF v_last >= p_fire THEN
    -- Passed over: nobody claimed it, which the ring tells for fires inside it, and for every
    -- fire while it holds all the claims ever made (fewer than eight).
    IF v_last > p_fire
       AND ((v_oldest IS NOT NULL AND p_fire > v_oldest)
            OR coalesce(cardinality(r.recent_fires), 0) < 8 OR r.claims_made <= 8) THEN
      answer := CASE WHEN v_missed THEN 8 ELSE 5 END;
    END IF;
    RETURN;
  END IF;
  IF v_missed THEN
    answer := 8;
    RETURN;
  END IF;
  -- A fire ahead of the database's clock is only taken while the job is free; busy or paused, it
  -- is decided by the claim at its instant (docs/design/standby.md, "Claiming ahead").
  IF p_fire > v_now AND (r.paused_at IS NOT NULL OR v_held) THEN
    answer := 4;
    val := greatest(1, ceil(extract(epoch FROM p_fire - v_now) * 1000));
    RETURN;
  END IF;
  IF r.paused_at IS NOT NULL THEN
    -- A paused fire is dropped whatever the overlap: its report is recorded as for a busy skip.
    answer := 6;
    paused_at := r.paused_at;
    paused_by := r.paused_by;
    INSERT INTO {schema}.reports (job, fire, reporter) VALUES (p_job, p_fire, p_nonce)
      ON CONFLICT (job, fire) DO NOTHING;
    IF FOUND THEN
      UPDATE {schema}.jobs SET reported_through = greatest(reported_through, p_fire)
        WHERE job = p_job;
      val := 1;
    ELSIF EXISTS (SELECT 1 FROM {schema}.reports
                  WHERE job = p_job AND fire = p_fire AND reporter = p_nonce) THEN
      val := 1;
    END IF;
    RETURN;
  END IF;
  -- A drop of this fire that another claimant reported decides it: it does not run, even once the
  -- lease is free. The claimant's own report (a busy answer whose reply was lost) does not stop it.
  SELECT reporter INTO v_reporter FROM {schema}.reports WHERE job = p_job AND fire = p_fire;
  IF v_reporter <> p_nonce THEN
    answer := 8;
    RETURN;
  END IF;
  IF v_held THEN
    answer := 1;
    IF p_replace THEN
      UPDATE {schema}.jobs SET cancel_holder = r.lease_holder WHERE job = p_job;
    END IF;
    IF p_skip THEN
      INSERT INTO {schema}.reports (job, fire, reporter) VALUES (p_job, p_fire, p_nonce)
        ON CONFLICT (job, fire) DO NOTHING;
      IF FOUND THEN
        UPDATE {schema}.jobs SET reported_through = greatest(reported_through, p_fire)
          WHERE job = p_job;
        val := 1;
      ELSIF EXISTS (SELECT 1 FROM {schema}.reports
                    WHERE job = p_job AND fire = p_fire AND reporter = p_nonce) THEN
        val := 1;
      END IF;
    END IF;
    RETURN;
  END IF;
  v_fence := greatest(r.fence + 1, floor(extract(epoch FROM v_now) * 1000000)::bigint);
  -- last_fire never moves back: an older fire's claim is remembered in the recent claims only.
  UPDATE {schema}.jobs SET
    last_fire = greatest(r.last_fire, p_fire),
    holder = CASE WHEN r.last_fire > p_fire THEN r.holder ELSE p_token END,
    fence = v_fence, lease_holder = p_token, claims_made = r.claims_made + 1,
    lease_until = v_now + p_lease_ms * interval '1 millisecond', cancel_holder = NULL,
    -- After the database's clock went back, an older fire's claim keeps the eight newest fires,
    -- in fire order, so that later claims drop the oldest first.
    recent_fires = CASE WHEN r.last_fire > p_fire THEN
        ARRAY(SELECT f FROM (SELECT u.f FROM unnest(r.recent_fires || p_fire) AS u(f)
                             ORDER BY u.f DESC LIMIT 8) AS k ORDER BY f)
      ELSE (r.recent_fires || p_fire)[greatest(1, cardinality(r.recent_fires) - 6):] END,
    recent_tokens = CASE WHEN r.last_fire > p_fire THEN
        ARRAY(SELECT t FROM (SELECT u.f, u.t
                             FROM unnest(r.recent_fires || p_fire, r.recent_tokens || p_token)
                               AS u(f, t)
                             ORDER BY u.f DESC LIMIT 8) AS k ORDER BY f)
      ELSE (r.recent_tokens || p_token)[greatest(1, cardinality(r.recent_tokens) - 6):] END
    WHERE job = p_job;
  -- The claimant's own report of this fire (a busy answer it never got) gives way: it reports the
  -- fire if it gives it up.
  IF v_reporter IS NOT NULL THEN
    DELETE FROM {schema}.reports WHERE job = p_job AND fire = p_fire;
  END IF;
  IF p_history THEN
    UPDATE {schema}.runs SET outcome = 'lost' WHERE job = p_job AND outcome = 'running';
    INSERT INTO {schema}.runs (job, fire, instance, fence, started, outcome, lateness_ms)
      VALUES (p_job, p_fire, p_instance, v_fence, greatest(v_now, p_fire), 'running',
              greatest(0, floor(extract(epoch FROM v_now - p_fire) * 1000)));
  END IF;
  answer := 2;
  val := v_fence;
END
$claim$;

-- The claim of binaries that predate missed fires: claim_v5 itself, which only adds an answer
-- they know (dropped by another, for a fire reported missed). The check of missed fires is in a
-- function of a new name rather than in claim_v4: a binary of an earlier version that creates
-- its functions again (it found one missing) writes its own claim_v4, which would take the check
-- away from the claims of this version; it never touches claim_v5.
CREATE OR REPLACE FUNCTION {schema}.claim_v4(
  p_job text, p_fire timestamptz, p_token text, p_lease_ms bigint, p_replace boolean,
  p_skip boolean, p_nonce text, p_tolerance_ms bigint, p_instance text, p_history boolean,
  OUT answer integer, OUT val bigint, OUT ignored boolean, OUT paused_at timestamptz,
  OUT paused_by text)
LANGUAGE sql AS $claim_v4$
-- revision 1
  SELECT * FROM {schema}.claim_v5(p_job, p_fire, p_token, p_lease_ms, p_replace, p_skip, p_nonce,
                                  p_tolerance_ms, p_instance, p_history)
$claim_v4$;

-- The claim of binaries that predate claiming ahead: claim_v4 itself, which only adds an answer
-- they know (too early, for a busy or paused fire ahead of the database's clock).
CREATE OR REPLACE FUNCTION {schema}.claim_v3(
  p_job text, p_fire timestamptz, p_token text, p_lease_ms bigint, p_replace boolean,
  p_skip boolean, p_nonce text, p_tolerance_ms bigint, p_instance text, p_history boolean,
  OUT answer integer, OUT val bigint, OUT ignored boolean, OUT paused_at timestamptz,
  OUT paused_by text)
LANGUAGE sql AS $claim_v3$
-- revision 1
  SELECT * FROM {schema}.claim_v4(p_job, p_fire, p_token, p_lease_ms, p_replace, p_skip, p_nonce,
                                  p_tolerance_ms, p_instance, p_history)
$claim_v3$;

-- The claim of binaries that predate decided drops: claim_v3 with a fire another claimant reported
-- as dropped answered as busy (1) and not to report, so that they do not run it either.
CREATE OR REPLACE FUNCTION {schema}.claim_v2(
  p_job text, p_fire timestamptz, p_token text, p_lease_ms bigint, p_replace boolean,
  p_skip boolean, p_nonce text, p_tolerance_ms bigint, p_instance text, p_history boolean,
  OUT answer integer, OUT val bigint, OUT ignored boolean, OUT paused_at timestamptz,
  OUT paused_by text)
LANGUAGE sql AS $claim_v2$
-- revision 1
  SELECT CASE c.answer WHEN 8 THEN 1 ELSE c.answer END, c.val, c.ignored, c.paused_at, c.paused_by
  FROM {schema}.claim_v3(p_job, p_fire, p_token, p_lease_ms, p_replace, p_skip, p_nonce,
                         p_tolerance_ms, p_instance, p_history) AS c
$claim_v2$;

-- The claim of binaries that predate pauses: claim_v2 with a paused fire answered as busy (1), so
-- that they do not run a paused job either, and a fire claimed by another as already ran (0).
CREATE OR REPLACE FUNCTION {schema}.claim_v1(
  p_job text, p_fire timestamptz, p_token text, p_lease_ms bigint, p_replace boolean,
  p_skip boolean, p_nonce text, p_tolerance_ms bigint, p_instance text, p_history boolean,
  OUT answer integer, OUT val bigint, OUT ignored boolean)
LANGUAGE sql AS $claim_v1$
-- revision 1
  SELECT CASE c.answer WHEN 6 THEN 1 WHEN 7 THEN 0 ELSE c.answer END, c.val, c.ignored
  FROM {schema}.claim_v2(p_job, p_fire, p_token, p_lease_ms, p_replace, p_skip, p_nonce,
                         p_tolerance_ms, p_instance, p_history) AS c
$claim_v1$;

-- Whether this claimant reports dropped fire p_fire first: false when another claimant reported
-- it, or when it was reported missed and nobody claimed it; its own report answers true again.
-- Decided under the job's row lock, as report_missed_v1 is, so that a fire is reported either
-- dropped or missed, never both.
CREATE OR REPLACE FUNCTION {schema}.first_report_v1(p_job text, p_fire timestamptz, p_nonce text)
RETURNS boolean LANGUAGE plpgsql AS $first_report$
-- revision 1
DECLARE
  r {schema}.jobs%ROWTYPE;
BEGIN
  -- A fire further ahead of the database's clock than a claim may be comes from a host whose
  -- clock is ahead: it reports the drop on its own word, and nothing is recorded.
  IF p_fire > clock_timestamp() + interval '1 second' THEN
    RETURN true;
  END IF;
  SELECT * INTO r FROM {schema}.jobs WHERE job = p_job FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO {schema}.jobs (job) VALUES (p_job) ON CONFLICT (job) DO NOTHING;
    SELECT * INTO r FROM {schema}.jobs WHERE job = p_job FOR UPDATE;
  END IF;
  DELETE FROM {schema}.reports
    WHERE job = p_job AND reported_at < clock_timestamp() - interval '1 hour';
  IF EXISTS (SELECT 1 FROM {schema}.reports
             WHERE job = p_job AND fire = p_fire AND reporter = p_nonce) THEN
    RETURN true;
  END IF;
  -- Nobody claimed it: it lies after the last claim, or among the recent claims but not one of
  -- them (as claim_v5 tells a passed-over fire).
  IF p_fire <= r.missed_through
     AND (r.missed_from IS NULL OR p_fire > r.missed_from OR p_fire <= r.missed_before)
     AND (r.last_fire IS NULL OR p_fire > r.last_fire
          OR (p_fire <> ALL (r.recent_fires)
              AND (cardinality(r.recent_fires) < 8 OR r.claims_made <= 8
                   OR p_fire > (SELECT min(f) FROM unnest(r.recent_fires) AS f)))) THEN
    RETURN false;
  END IF;
  INSERT INTO {schema}.reports (job, fire, reporter) VALUES (p_job, p_fire, p_nonce)
    ON CONFLICT (job, fire) DO NOTHING;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE {schema}.jobs SET reported_through = greatest(reported_through, p_fire)
    WHERE job = p_job;
  RETURN true;
END
$first_report$;

-- first_report_v1 with a third answer: 1 this process reports the drop first (also when it asks
-- again), 0 another reported it first or it was reported missed, 2 another claimant's claim of the
-- fire took effect (it ran there, or that claimant reports it): nothing is recorded.
CREATE OR REPLACE FUNCTION {schema}.first_report_v2(p_job text, p_fire timestamptz, p_nonce text)
RETURNS integer LANGUAGE plpgsql AS $first_report$
-- revision 1
DECLARE
  r {schema}.jobs%ROWTYPE;
  v_claimed_by text;
BEGIN
  IF p_fire > clock_timestamp() + interval '1 second' THEN
    RETURN 1;
  END IF;
  SELECT * INTO r FROM {schema}.jobs WHERE job = p_job FOR UPDATE;
  IF NOT FOUND THEN
    RETURN CASE WHEN {schema}.first_report_v1(p_job, p_fire, p_nonce) THEN 1 ELSE 0 END;
  END IF;
  IF r.last_fire = p_fire THEN
    v_claimed_by := r.holder;
  ELSIF r.last_fire > p_fire THEN
    FOR i IN 1 .. coalesce(cardinality(r.recent_fires), 0) LOOP
      IF r.recent_fires[i] = p_fire THEN
        v_claimed_by := r.recent_tokens[i];
      END IF;
    END LOOP;
  END IF;
  IF v_claimed_by IS NOT NULL AND left(v_claimed_by, length(p_nonce) + 1) <> p_nonce || ':' THEN
    RETURN 2;
  END IF;
  IF v_claimed_by IS NOT NULL THEN
    -- Its own claim of the fire: the fire is this claimant's to report, whatever was recorded since.
    INSERT INTO {schema}.reports (job, fire, reporter) VALUES (p_job, p_fire, p_nonce)
      ON CONFLICT (job, fire) DO NOTHING;
    RETURN 1;
  END IF;
  RETURN CASE WHEN {schema}.first_report_v1(p_job, p_fire, p_nonce) THEN 1 ELSE 0 END;
END
$first_report$;

-- The job's fate point: the newest fire claimed, reported dropped or reported missed. The
-- reports count too: binaries that predate reported_through record drops only there. Also a
-- value ahead of the database's clock: claims and reports that far ahead are refused, so it was
-- written before the database's clock was set back, and the fires up to it were decided then
-- (p_tolerance_ms is kept for the binaries that call it).
CREATE OR REPLACE FUNCTION {schema}.fate_point_v1(p_job text, p_tolerance_ms bigint)
RETURNS timestamptz LANGUAGE sql STABLE AS $fate_point$
-- revision 1
  SELECT max(v) FROM (
    SELECT last_fire FROM {schema}.jobs WHERE job = p_job
    UNION ALL SELECT reported_through FROM {schema}.jobs WHERE job = p_job
    UNION ALL SELECT missed_through FROM {schema}.jobs WHERE job = p_job
    UNION ALL SELECT max(fire) FROM {schema}.reports WHERE job = p_job
  ) AS p(v)
  WHERE p_tolerance_ms IS NOT NULL
$fate_point$;

-- Records the fires up to p_last as missed: when the job's fate point lies before p_last (or
-- there is none), missed_through moves to p_last. Answers the fate point as it was, so that of
-- the processes that found the same fires missed, each fire is reported by one.
CREATE OR REPLACE FUNCTION {schema}.report_missed_v1(p_job text, p_last timestamptz,
  p_tolerance_ms bigint)
RETURNS timestamptz LANGUAGE plpgsql AS $report_missed$
-- revision 1
DECLARE
  r {schema}.jobs%ROWTYPE;
  v_point timestamptz;
BEGIN
  -- Missed fires ahead of the database's clock come from a host whose clock is ahead: recorded,
  -- they would decide fires that have not come yet.
  IF p_last > clock_timestamp() + p_tolerance_ms * interval '1 millisecond' THEN
    RAISE EXCEPTION 'the missed fires lie ahead of the database clock: this host''s clock is ahead; they were not recorded';
  END IF;
  SELECT * INTO r FROM {schema}.jobs WHERE job = p_job FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO {schema}.jobs (job) VALUES (p_job) ON CONFLICT (job) DO NOTHING;
    SELECT * INTO r FROM {schema}.jobs WHERE job = p_job FOR UPDATE;
  END IF;
  v_point := {schema}.fate_point_v1(p_job, p_tolerance_ms);
  IF v_point IS NULL OR v_point < p_last THEN
    -- Missed fires that do not go on from those recorded before start at the fate point: a fire
    -- between those and it, still open in a process, was not reported missed.
    UPDATE {schema}.jobs SET missed_through = p_last,
      missed_from = CASE WHEN v_point IS NOT DISTINCT FROM r.missed_through THEN r.missed_from
                         ELSE v_point END,
      missed_before = CASE WHEN v_point IS NOT DISTINCT FROM r.missed_through THEN r.missed_before
                           WHEN v_point IS NULL THEN NULL ELSE r.missed_through END
      WHERE job = p_job;
  END IF;
  RETURN v_point;
END
$report_missed$;

-- Records the fires from p_first to p_last as missed unless the fate point is at p_last already;
-- answers the point as it was. The answer is kept (missed_answers): a retry by the same reporter
-- (p_nonce) for the same last fire is answered the same, also after other processes moved the
-- point. The fires recorded are those after the point from p_first on (missed_from: after it): a
-- fire before p_first still open in a process is that process's to decide. A report that goes on
-- from the missed fires before extends them. (report_missed_v1 is kept for earlier versions.)
CREATE OR REPLACE FUNCTION {schema}.report_missed_v2(p_job text, p_first timestamptz,
  p_last timestamptz, p_tolerance_ms bigint, p_nonce text)
RETURNS timestamptz LANGUAGE plpgsql AS $report_missed$
-- revision 1
DECLARE
  r {schema}.jobs%ROWTYPE;
  v_kept {schema}.missed_answers%ROWTYPE;
  v_point timestamptz;
  v_from timestamptz;
BEGIN
  SELECT * INTO r FROM {schema}.jobs WHERE job = p_job FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO {schema}.jobs (job) VALUES (p_job) ON CONFLICT (job) DO NOTHING;
    SELECT * INTO r FROM {schema}.jobs WHERE job = p_job FOR UPDATE;
  END IF;
  SELECT * INTO v_kept FROM {schema}.missed_answers
    WHERE job = p_job AND reporter = p_nonce AND last_fire = p_last;
  IF FOUND THEN
    RETURN v_kept.answer;
  END IF;
  -- Missed fires ahead of the database's clock come from a host whose clock is ahead: recorded,
  -- they would decide fires that have not come yet.
  IF p_last > clock_timestamp() + p_tolerance_ms * interval '1 millisecond' THEN
    RAISE EXCEPTION 'the missed fires lie ahead of the database clock: this host''s clock is ahead; they were not recorded';
  END IF;
  DELETE FROM {schema}.missed_answers
    WHERE job = p_job AND reported_at < clock_timestamp() - interval '1 hour';
  v_point := {schema}.fate_point_v1(p_job, p_tolerance_ms);
  INSERT INTO {schema}.missed_answers (job, reporter, last_fire, answer)
    VALUES (p_job, p_nonce, p_last, v_point) ON CONFLICT DO NOTHING;
  IF v_point IS NULL OR v_point < p_last THEN
    v_from := greatest(v_point, p_first - interval '1 millisecond');
    IF v_point IS NOT NULL AND v_point = r.missed_through AND v_from = v_point THEN
      UPDATE {schema}.jobs SET missed_through = p_last WHERE job = p_job;
    ELSE
      UPDATE {schema}.jobs SET missed_through = p_last, missed_from = v_from,
        missed_before = r.missed_through
        WHERE job = p_job;
    END IF;
  END IF;
  RETURN v_point;
END
$report_missed$;

-- As report_missed_v2, and refused while the last fire is not past its misfire grace
-- (p_grace_ms) by the database's clock, less the tolerance: missed fires whose grace has not
-- passed come from a host whose clock is ahead, and recorded they would move the fate point past
-- fires still open in other processes.
CREATE OR REPLACE FUNCTION {schema}.report_missed_v3(p_job text, p_first timestamptz,
  p_last timestamptz, p_tolerance_ms bigint, p_grace_ms bigint, p_nonce text)
RETURNS timestamptz LANGUAGE plpgsql AS $report_missed$
-- revision 1
BEGIN
  IF p_last + p_grace_ms * interval '1 millisecond'
       > clock_timestamp() + p_tolerance_ms * interval '1 millisecond'
     AND NOT EXISTS (SELECT 1 FROM {schema}.missed_answers
       WHERE job = p_job AND reporter = p_nonce AND last_fire = p_last) THEN
    RAISE EXCEPTION 'the missed fires are not past their misfire grace by the database clock: this host''s clock is ahead; they were not recorded';
  END IF;
  RETURN {schema}.report_missed_v2(p_job, p_first, p_last, p_tolerance_ms, p_nonce);
END
$report_missed$;

CREATE OR REPLACE FUNCTION {schema}.claim_manual_v1(
  p_job text, p_id text, p_token text, p_lease_ms bigint, p_requested timestamptz,
  p_instance text, p_history boolean, OUT answer integer, OUT val bigint)
LANGUAGE plpgsql AS $manual$
-- revision 1
DECLARE
  v_now timestamptz := clock_timestamp();
  r {schema}.jobs%ROWTYPE;
  v_claimed_by text;
  v_fence bigint;
BEGIN
  answer := 0; val := 0;
  SELECT * INTO r FROM {schema}.jobs WHERE job = p_job FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO {schema}.jobs (job) VALUES (p_job) ON CONFLICT (job) DO NOTHING;
    SELECT * INTO r FROM {schema}.jobs WHERE job = p_job FOR UPDATE;
  END IF;
  FOR i IN 1 .. coalesce(cardinality(r.manual_ids), 0) LOOP
    IF r.manual_ids[i] = p_id THEN
      v_claimed_by := r.manual_tokens[i];
    END IF;
  END LOOP;
  IF v_claimed_by = p_token THEN
    IF r.lease_holder IS DISTINCT FROM p_token OR r.lease_until <= v_now THEN
      answer := 3;
      RETURN;
    END IF;
    UPDATE {schema}.jobs SET lease_until = v_now + p_lease_ms * interval '1 millisecond'
      WHERE job = p_job;
    answer := 2;
    val := r.fence;
    RETURN;
  END IF;
  IF v_claimed_by IS NOT NULL THEN
    RETURN;
  END IF;
  IF r.lease_holder IS NOT NULL AND r.lease_until > v_now THEN
    answer := 1;
    val := 1;
    RETURN;
  END IF;
  v_fence := greatest(r.fence + 1, floor(extract(epoch FROM v_now) * 1000000)::bigint);
  UPDATE {schema}.jobs SET
    fence = v_fence, lease_holder = p_token,
    lease_until = v_now + p_lease_ms * interval '1 millisecond', cancel_holder = NULL,
    manual_ids = (r.manual_ids || p_id)[greatest(1, cardinality(r.manual_ids) - 6):],
    manual_tokens = (r.manual_tokens || p_token)[greatest(1, cardinality(r.manual_tokens) - 6):]
    WHERE job = p_job;
  IF p_history THEN
    UPDATE {schema}.runs SET outcome = 'lost' WHERE job = p_job AND outcome = 'running';
    INSERT INTO {schema}.runs (job, fire, instance, fence, started, outcome, lateness_ms)
      VALUES (p_job, p_requested, p_instance, v_fence, v_now, 'running',
              greatest(0, floor(extract(epoch FROM v_now - p_requested) * 1000)));
  END IF;
  answer := 2;
  val := v_fence;
END
$manual$;

-- A manual run: refused once asked for longer ago than the grace (answer 9, the ms since), or
-- when it may be one of the runs forgotten; a run claimed is kept for the grace and at least an
-- hour from the later of its request and its claim.
CREATE OR REPLACE FUNCTION {schema}.claim_manual_v2(
  p_job text, p_id text, p_token text, p_lease_ms bigint, p_requested timestamptz,
  p_grace_ms bigint, p_instance text, p_history boolean, OUT answer integer, OUT val bigint)
LANGUAGE plpgsql AS $manual2$
-- revision 1
DECLARE
  v_now timestamptz := clock_timestamp();
  v_cut timestamptz := v_now - p_grace_ms * interval '1 millisecond';
  -- Runs claimed are remembered for the grace and at least an hour (`MANUAL_RUNS_KEPT`).
  v_keep timestamptz := v_now - greatest(p_grace_ms, 3600000) * interval '1 millisecond';
  r {schema}.jobs%ROWTYPE;
  v_claimed_by text;
  v_fence bigint;
BEGIN
  answer := 0; val := 0;
  SELECT * INTO r FROM {schema}.jobs WHERE job = p_job FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO {schema}.jobs (job) VALUES (p_job) ON CONFLICT (job) DO NOTHING;
    SELECT * INTO r FROM {schema}.jobs WHERE job = p_job FOR UPDATE;
  END IF;
  v_claimed_by := coalesce(r.manual_run_tokens[array_position(r.manual_run_ids, p_id)],
                           r.manual_tokens[array_position(r.manual_ids, p_id)]);
  IF v_claimed_by = p_token THEN
    IF r.lease_holder IS DISTINCT FROM p_token OR r.lease_until <= v_now THEN
      answer := 3;
      RETURN;
    END IF;
    UPDATE {schema}.jobs SET lease_until = v_now + p_lease_ms * interval '1 millisecond'
      WHERE job = p_job;
    answer := 2;
    val := r.fence;
    RETURN;
  END IF;
  IF v_claimed_by IS NOT NULL OR p_requested <= r.manual_forgotten THEN
    RETURN;
  END IF;
  IF p_requested < v_cut THEN
    answer := 9;
    val := floor(extract(epoch FROM v_now - p_requested) * 1000)::bigint;
    RETURN;
  END IF;
  IF r.lease_holder IS NOT NULL AND r.lease_until > v_now THEN
    answer := 1;
    val := 1;
    RETURN;
  END IF;
  v_fence := greatest(r.fence + 1, floor(extract(epoch FROM v_now) * 1000000)::bigint);
  UPDATE {schema}.jobs SET
    fence = v_fence, lease_holder = p_token,
    lease_until = v_now + p_lease_ms * interval '1 millisecond', cancel_holder = NULL,
    manual_forgotten = greatest(r.manual_forgotten,
      (SELECT max(q) FROM unnest(r.manual_run_requested) AS u(q) WHERE q < v_keep)),
    manual_run_ids = array_append(ARRAY(
      SELECT i FROM unnest(r.manual_run_ids, r.manual_run_requested) WITH ORDINALITY AS u(i, q, n)
      WHERE q >= v_keep ORDER BY n), p_id),
    manual_run_tokens = array_append(ARRAY(
      SELECT t FROM unnest(r.manual_run_tokens, r.manual_run_requested) WITH ORDINALITY AS u(t, q, n)
      WHERE q >= v_keep ORDER BY n), p_token),
    manual_run_requested = array_append(ARRAY(
      SELECT q FROM unnest(r.manual_run_requested) WITH ORDINALITY AS u(q, n)
      WHERE q >= v_keep ORDER BY n), greatest(p_requested, v_now))
    WHERE job = p_job;
  IF p_history THEN
    UPDATE {schema}.runs SET outcome = 'lost' WHERE job = p_job AND outcome = 'running';
    INSERT INTO {schema}.runs (job, fire, instance, fence, started, outcome, lateness_ms)
      VALUES (p_job, p_requested, p_instance, v_fence, v_now, 'running',
              greatest(0, floor(extract(epoch FROM v_now - p_requested) * 1000)));
  END IF;
  answer := 2;
  val := v_fence;
END
$manual2$;

CREATE OR REPLACE FUNCTION {schema}.abandon_v1(p_job text, p_fire timestamptz, p_token text)
RETURNS boolean LANGUAGE plpgsql AS $abandon$
-- revision 1
DECLARE
  r {schema}.jobs%ROWTYPE;
BEGIN
  SELECT * INTO r FROM {schema}.jobs WHERE job = p_job FOR UPDATE;
  -- (A row without a claim yet has a null last_fire: not ours either.)
  IF NOT FOUND OR NOT coalesce((r.last_fire = p_fire AND r.holder = p_token)
                               OR p_token = ANY (r.recent_tokens), false) THEN
    -- The claim has not arrived (it may still, on another connection): it will be refused.
    INSERT INTO {schema}.jobs (job, abandoned) VALUES (p_job, ARRAY[p_token])
      ON CONFLICT (job) DO UPDATE
      SET abandoned = (p_token || array_remove({schema}.jobs.abandoned, p_token))[1:8];
    RETURN false;
  END IF;
  UPDATE {schema}.jobs SET
    lapsed = CASE WHEN last_fire = p_fire THEN p_fire ELSE lapsed END,
    lease_until = CASE WHEN lease_holder = p_token THEN NULL ELSE lease_until END,
    cancel_holder = CASE WHEN lease_holder = p_token THEN NULL ELSE cancel_holder END,
    lease_holder = CASE WHEN lease_holder = p_token THEN NULL ELSE lease_holder END
    WHERE job = p_job;
  UPDATE {schema}.runs SET outcome = 'abandoned', ended = clock_timestamp()
    WHERE job = p_job AND fire = p_fire AND outcome = 'running';
  RETURN true;
END
$abandon$;

CREATE OR REPLACE FUNCTION {schema}.renew_v1(p_job text, p_token text, p_lease_ms bigint)
RETURNS integer LANGUAGE plpgsql AS $renew$
-- revision 1
DECLARE
  v_cancel boolean;
BEGIN
  UPDATE {schema}.jobs SET lease_until = clock_timestamp() + p_lease_ms * interval '1 millisecond'
    WHERE job = p_job AND lease_holder = p_token AND lease_until > clock_timestamp()
    RETURNING coalesce(cancel_holder = p_token, false) INTO v_cancel;
  IF NOT FOUND THEN
    RETURN 0;
  END IF;
  RETURN CASE WHEN v_cancel THEN 2 ELSE 1 END;
END
$renew$;

CREATE OR REPLACE FUNCTION {schema}.release_v1(p_job text, p_token text)
RETURNS boolean LANGUAGE plpgsql AS $release$
-- revision 1
BEGIN
  UPDATE {schema}.jobs SET lease_holder = NULL, lease_until = NULL, cancel_holder = NULL
    WHERE job = p_job AND lease_holder = p_token;
  RETURN FOUND;
END
$release$;
