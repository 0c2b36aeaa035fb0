//! The Lua of the Redis guard: one script that carries out a batch of operations — claims,
//! releases, renewals, abandons and drop reports of any jobs — in one call, each exactly as it
//! would run alone. The key layout and the meaning of each answer are in the documentation of
//! the guard ([`super`]).

use std::sync::LazyLock;

use redis::Script;

/// The batch script, loaded once per server and run by SHA (loaded again after a restart).
pub(super) static BATCH: LazyLock<Script> = LazyLock::new(|| Script::new(BATCH_LUA));

/// Attends the processes present (the sorted set `KEYS[1]`): `ARGV[1]` the process's id, `ARGV[2]`
/// how long an entry stays (ms). Scores are the server's clock (`TIME`), so a process whose
/// clock is off neither lingers in the list nor drops out of it. Answers the members left.
pub(in super::super) static PRESENCE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%.0f', now - tonumber(ARGV[2])))
return redis.call('ZRANGE', KEYS[1], 0, -1)
"#,
    )
});

/// Partition ownership (docs/design/ownership.md): `KEYS[1]` the group's members (a sorted set
/// scored by when each last attended, server ms), `KEYS[2]` its leases (a hash, field the
/// partition, value `<epoch> <expiry ms> <alive ms> <owner>`, `alive` the owner's own clock when it
/// sent its last renewal). ARGV: the process, the presence TTL (ms), the lease (ms), its clock
/// (Unix ms), then the partitions it wants. Takes or renews each wanted partition that is free,
/// expired or its own (a new owner, or its own after it expired, gets an epoch above the last and
/// at least the server's clock in µs); expires at once each live one it owns and does not want.
/// A lease is never taken to last longer than `lease` from now (a step back of the server's
/// clock). Answers the server's clock (ms), the members, and every lease as field, value.
pub(in super::super) static OWN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local me = ARGV[1]
local lease = tonumber(ARGV[3])
local alive = tonumber(ARGV[4])
redis.call('ZADD', KEYS[1], now, me)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%.0f', now - tonumber(ARGV[2])))
redis.call('PEXPIRE', KEYS[1], 86400000)
local wanted = {}
for i = 5, #ARGV do wanted[ARGV[i]] = true end
local flat = redis.call('HGETALL', KEYS[2])
local leases = {}
for i = 1, #flat, 2 do
  local epoch, expiry, seen, owner = string.match(flat[i + 1], '^(%d+) (%d+) (%d+) (.*)$')
  if epoch then
    -- Never longer than a lease from now: after the server's clock stepped back, a lease taken
    -- before the step would outlast its owner.
    leases[flat[i]] = {tonumber(epoch), math.min(tonumber(expiry), now + lease), owner, tonumber(seen)}
  end
end
local writes = {}
for p in pairs(wanted) do
  local l = leases[p]
  if l == nil or l[2] <= now or l[3] == me then
    local epoch = 0
    if l ~= nil then epoch = l[1] end
    if l == nil or l[3] ~= me or l[2] <= now then
      epoch = math.max(epoch + 1, now_us)
    end
    leases[p] = {epoch, now + lease, me, alive}
    writes[#writes + 1] = p
  end
end
for p, l in pairs(leases) do
  if l[3] == me and l[2] > now and not wanted[p] then
    l[2] = now
    writes[#writes + 1] = p
  end
end
if #writes > 0 then
  local args = {}
  for _, p in ipairs(writes) do
    local l = leases[p]
    args[#args + 1] = p
    args[#args + 1] = string.format('%.0f %.0f %.0f ', l[1], l[2], l[4]) .. l[3]
  end
  redis.call('HSET', KEYS[2], unpack(args))
end
redis.call('PEXPIRE', KEYS[2], 86400000)
local out = {}
for p, l in pairs(leases) do
  out[#out + 1] = p
  out[#out + 1] = string.format('%.0f %.0f %.0f ', l[1], l[2], l[4]) .. l[3]
end
return {string.format('%.0f', now), redis.call('ZRANGE', KEYS[1], 0, -1), out}
"#,
    )
});

/// A planned stop (docs/design/ownership.md): `KEYS` as [`OWN`], `ARGV[1]` the process. Removes
/// it from the members and ends every live lease it holds now (epoch and owner kept, as `OWN`
/// gives a partition up), so that the others take its partitions at their next `OWN`.
pub(in super::super) static LEAVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me = ARGV[1]
redis.call('ZREM', KEYS[1], me)
local flat = redis.call('HGETALL', KEYS[2])
local args = {}
for i = 1, #flat, 2 do
  local epoch, expiry, seen, owner = string.match(flat[i + 1], '^(%d+) (%d+) (%d+) (.*)$')
  if epoch and owner == me and tonumber(expiry) > now then
    args[#args + 1] = flat[i]
    args[#args + 1] = string.format('%.0f %.0f %.0f ', tonumber(epoch), now, tonumber(seen)) .. owner
  end
end
if #args > 0 then
  redis.call('HSET', KEYS[2], unpack(args))
end
return #args / 2
"#,
    )
});

/// Lists the processes of the sorted set `KEYS[1]` without attending: answers the server's clock
/// (Unix ms) and each member with its score (when it last attended), for the command-line tool.
pub(in super::super) static PROCESSES: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {string.format('%.0f', now), redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')}
"#,
    )
});

/// The code of each operation in `ARGV`, followed by its arguments; its keys come next in `KEYS`.
pub(super) mod op {
    /// KEYS: lock, state, cancel, the report record of the fire. ARGV: fire (Unix ms), the
    /// claimant's token, lease (ms), `1` for `overlap = "replace"`, the ahead tolerance (ms), `1`
    /// for `overlap = "skip"`, the guard value's nonce, the report record's TTL (ms).
    pub(in super::super) const CLAIM: &str = "c";
    /// KEYS: lock, cancel. ARGV: the holder's token.
    pub(in super::super) const RELEASE: &str = "r";
    /// KEYS: lock, cancel. ARGV: the holder's token, lease (ms).
    pub(in super::super) const RENEW: &str = "n";
    /// KEYS: lock, state, cancel. ARGV: fire (Unix ms), the claimant's token.
    pub(in super::super) const ABANDON: &str = "a";
    /// KEYS: the report record of the fire, state. ARGV: the guard value's nonce, the record's
    /// TTL (ms), fire (Unix ms).
    pub(in super::super) const FIRST_REPORT: &str = "f";
    /// A manual run. KEYS: lock, state, the job's manual runs. ARGV: the run's id (16 hex
    /// digits), the claimant's token, lease (ms), when it was asked for (Unix ms), the job's
    /// misfire grace (ms).
    pub(in super::super) const MANUAL: &str = "m";
    /// The fate point. KEYS: state. Answers `{1, point}` or `{0}` (no record).
    pub(in super::super) const FATE_POINT: &str = "p";
    /// A history entry. KEYS: the job's history. ARGV: the fire (Unix ms, the score), the entry
    /// after its end time (which the server's clock gives), the entries kept, how long they are
    /// kept (ms).
    pub(in super::super) const HISTORY: &str = "h";
    /// Missed fires. KEYS: state, the answer kept for this guard value and last fire. ARGV: the
    /// first and the last missed fire (Unix ms), how far the last may lie ahead of the server's
    /// clock (ms: the ahead tolerance less the job's misfire grace, as a missed fire is past its
    /// grace), how long the answer is kept (ms). Answers the fate point before, as [`FATE_POINT`]; a retry answers as the first
    /// try did.
    pub(in super::super) const REPORT_MISSED: &str = "g";
}

/// Answers one table per operation, in order: a claim `{answer, value, ignored}` (answer `0`
/// already ran, `1` busy (value: first report), `2` acquired (value: the fencing token), `3`
/// lapsed, `4` too early (value: ms ahead of the server's clock: beyond the tolerance, or ahead
/// at all while the job is busy or paused), `5` superseded, `6` paused
/// (value: first report; a fourth element carries the pause as stored, `<at ms> <by>`), `7`
/// claimed by another (the record names another claimant of this fire), `8` dropped by another
/// (another claimant recorded its report of this fire); `ignored`
/// is `1` when a recorded `last` far ahead of the server's clock was ignored); a manual claim
/// `{answer, value, 0}` with the answers `0`, `1`, `2` and `3` of a claim (busy always with value
/// `1`: nothing is recorded) and `9` too late (value: ms since the run was asked for, by the
/// server's clock); any other operation `{result}`; an operation that failed `{-1, message}` — one job's broken keys fail that job's
/// operation, never the batch. A node that takes no writes (`READONLY`, `NOREPLICAS`) fails the
/// whole call with that error.
pub(crate) const BATCH_LUA: &str = r#"
-- How far ahead of the server's clock a fire may lie (`CLAIM_AHEAD_TOLERANCE`).
local TOLERANCE_MS = 1000
-- How long a manual run claimed is remembered at least (`MANUAL_RUNS_KEPT`).
local RUNS_KEPT_MS = 3600000
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- Who claimed `fire` among the recent claims, and the oldest fire they hold. The state hash keeps
-- the last eight claims in a ring of fields r0..r7 (`<fire> <token>`), written at n % 8 with n the
-- number of claims, so that a claim writes two short fields and parses nothing; the ring is read
-- only when a later fire was claimed since (a retry after a lost reply, a late process).
local function recent_claimant(state_key, fire)
  local ring = redis.call('HMGET', state_key, 'r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7')
  local who, oldest = false, nil
  for i = 1, 8 do
    if ring[i] then
      local f, tok = string.match(ring[i], '^(%S+) (%S+)$')
      f = tonumber(f)
      if f then
        if f == fire then who = tok end
        if not oldest or f < oldest then oldest = f end
      end
    end
  end
  return who, oldest
end

-- Remembers the claim `entry` (`<fire> <token>`) of a fire older than `last` (the server's clock
-- went back): the ring keeps the eight newest fires claimed, rewritten in fire order from the
-- field the next claim writes (n + 1), so that later claims overwrite the oldest first.
local function remember_older(state_key, n, fire, entry)
  local ring = redis.call('HMGET', state_key, 'r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7')
  local entries = {{fire, entry}}
  for i = 1, 8 do
    local f = ring[i] and tonumber(string.match(ring[i], '^(%S+) '))
    if f then entries[#entries + 1] = {f, ring[i]} end
  end
  table.sort(entries, function(a, b) return a[1] < b[1] end)
  while #entries > 8 do table.remove(entries, 1) end
  local start = 0
  if #entries == 8 then start = (n + 1) % 8 end
  local fields = {}
  for i = 0, 7 do
    local e = entries[i + 1]
    fields[#fields + 1] = 'r' .. ((start + i) % 8)
    fields[#fields + 1] = e and e[2] or ''
  end
  redis.call('HSET', state_key, unpack(fields))
end

-- Whether `fire` was reported missed: up to `gone`, and not between the missed fires before
-- (`gb`) and the fate point the newest were recorded from (`gf`): a fire there may still be open
-- in a process, which reports it.
local function reported_missed(gone, gone_from, gone_before, fire)
  return gone ~= nil and gone >= fire
    and (gone_from == nil or fire > gone_from or (gone_before ~= nil and fire <= gone_before))
end

-- Records this guard value's report of `fire` unless another's is: `1` when it is the first (also
-- when it asks again). The state hash keeps the newest fire with a report record (`rep`, as read
-- by the caller), so that a claim deletes a report record only where one may exist.
local function report_once(report, state_key, rep, fire, nonce, ttl)
  if redis.call('SET', report, nonce, 'NX', 'PX', ttl) then
    if not tonumber(rep) or tonumber(rep) < fire then
      redis.call('HSET', state_key, 'rep', string.format('%.0f', fire))
    end
    return 1
  end
  if redis.call('GET', report) == nonce then
    return 1
  end
  return 0
end

local function claim(lock, state_key, cancel, report, fire_arg, token, px, replace, tolerance, skip, nonce, ttl)
  local fire = tonumber(fire_arg)
  tolerance = tonumber(tolerance)
  if fire > now + tolerance then
    return {4, fire - now, 0}
  end
  local state = redis.call('HMGET', state_key, 'last', 'fence', 'holder', 'n', 'paused', 'rep', 'gone', 'gf', 'gb', 'ab')
  if state[10] and string.find(' ' .. state[10] .. ' ', ' ' .. token .. ' ', 1, true) then
    -- Its claimant gave this claim up before it arrived: it takes nothing, as one whose lease ran
    -- out.
    return {3, 0, 0}
  end
  local stored = tonumber(state[1])
  local last = stored
  local ignored = 0
  if last and last > now + tolerance then
    last = nil
    ignored = 1
  end
  -- Who claimed this fire: the hash names the last claim's holder; an older fire's claimant is
  -- looked up in the recent claims only when a later fire was claimed since — also when that
  -- later fire lies far ahead of the server's clock and is ignored (the clock was set back, or
  -- a failover went to a server whose clock is behind): the fires it remembers were claimed.
  local claimed_by, oldest = false, nil
  if last == fire then
    claimed_by = state[3]
  elseif stored and stored > fire then
    claimed_by, oldest = recent_claimant(state_key, fire)
  end
  if claimed_by == token then
    if redis.call('GET', lock) ~= token then
      if last == fire then
        redis.call('HSET', state_key, 'lapsed', fire_arg)
      end
      return {3, 0, ignored}
    end
    local fence = tonumber(state[2])
    if not fence then
      return {-1, 'the hash ' .. state_key .. ' holds no valid fencing token; delete it to reset the job'}
    end
    redis.call('PEXPIRE', lock, px)
    return {2, fence, ignored}
  end
  if claimed_by then
    -- Another claimant's claim took this very fire.
    return {7, 0, ignored}
  end
  -- With the last claim ignored, a fire older than every claim remembered is past, as below.
  if ignored == 1 and oldest and fire < oldest and (tonumber(state[4]) or 0) > 8 then
    return {0, 0, ignored}
  end
  if last and last >= fire then
    -- Passed over: nobody claimed it, which the ring tells for fires inside it, and for every fire
    -- while it holds all the claims ever made (fewer than nine).
    if last > fire and ((oldest and fire > oldest) or (tonumber(state[4]) or 0) <= 8) then
      return {5, 0, ignored}
    end
    return {0, 0, ignored}
  end
  -- Reported missed while no process ran the job (docs/guide/downtime.md): decided, never started —
  -- unless this claimant reported the fire itself before (a busy answer it never got): then its
  -- report came first, and it may take the fire, as below.
  if reported_missed(tonumber(state[7]), tonumber(state[8]), tonumber(state[9]), fire) then
    local newest_report = tonumber(state[6])
    local own = newest_report and newest_report >= fire and redis.call('GET', report) == nonce
    if not own then
      return {8, 0, ignored}
    end
  end
  -- A fire ahead of the server's clock is only taken while the job is free; busy or paused, it is
  -- decided by the claim at its instant (docs/design/standby.md).
  local ahead = fire > now
  -- A paused fire is dropped whatever the overlap: its report is recorded as for a busy skip.
  if state[5] then
    if ahead then
      return {4, fire - now, ignored}
    end
    return {6, report_once(report, state_key, state[6], fire, nonce, ttl), ignored, state[5]}
  end
  -- A drop of this fire that another claimant reported decides it: it does not run, even once the
  -- lock is free. The claimant's own report (a busy answer whose reply was lost) does not stop it.
  local rep = tonumber(state[6])
  local reported = rep and rep >= fire and redis.call('GET', report)
  if reported and reported ~= nonce then
    return {8, 0, ignored}
  end
  if not redis.call('SET', lock, token, 'NX', 'PX', px) then
    if ahead then
      return {4, fire - now, ignored}
    end
    if replace == '1' then
      redis.call('SET', cancel, redis.call('GET', lock), 'PX', px)
    end
    if skip ~= '1' then
      return {1, 0, ignored}
    end
    return {1, report_once(report, state_key, state[6], fire, nonce, ttl), ignored}
  end
  local fence = math.max((tonumber(state[2]) or 0) + 1, now_us)
  local n = tonumber(state[4]) or 0
  if stored and stored > fire then
    -- `last` never moves back: the claim is remembered in the ring only, which keeps the newest
    -- fires claimed, written in fire order so that the next claims overwrite the oldest first.
    remember_older(state_key, n, fire, fire_arg .. ' ' .. token)
    redis.call('HSET', state_key, 'fence', string.format('%.0f', fence), 'n', n + 1)
  else
    redis.call('HSET', state_key, 'last', fire_arg, 'fence', string.format('%.0f', fence), 'holder', token,
      'n', n + 1, 'r' .. (n % 8), fire_arg .. ' ' .. token)
  end
  -- The claimant's own report of this fire (a busy answer it never got) gives way: it reports the
  -- fire if it gives it up.
  if reported then
    redis.call('DEL', report)
  end
  return {2, fence, ignored}
end

-- A manual run takes the lock and a fencing token like a claim, and is recorded apart from the
-- scheduled fires (last, holder, the ring r0..r7), so that they are untouched and the pause is not
-- read: the state hash names each run's claimant in a field `m:<id>`, and the sorted set `runs`
-- holds each id scored by the later of its request and its claim (Unix ms). A claim of a run
-- nobody claimed that was asked for longer than the grace ago (by the server's clock) is refused
-- (`9`). A run claimed is kept for the grace, and at least an hour, from that score: long past
-- any claim of it that could be granted, so that a late reader of a run nobody claimed is told
-- it is too late rather than mistaking it for one forgotten. The runs older than that are
-- forgotten, the newest score in `mf`, and a claim of a run asked for then or before (a longer
-- grace, a clock gone back) is refused as one that may have run. The fields m0..m7 are the ring of the last eight runs of an earlier version.
local function manual(lock, state_key, runs, id, token, px, requested_arg, grace_arg)
  local requested, grace = tonumber(requested_arg), tonumber(grace_arg)
  local state = redis.call('HMGET', state_key, 'fence', 'mf', 'm:' .. id,
    'm0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7')
  local claimed_by = state[3]
  for i = 4, 11 do
    if not claimed_by and state[i] then
      local run, tok = string.match(state[i], '^(%S+) (%S+)$')
      if run == id then claimed_by = tok end
    end
  end
  if claimed_by == token then
    if redis.call('GET', lock) ~= token then
      return {3, 0, 0}
    end
    local fence = tonumber(state[1])
    if not fence then
      return {-1, 'the hash ' .. state_key .. ' holds no valid fencing token; delete it to reset the job'}
    end
    redis.call('PEXPIRE', lock, px)
    return {2, fence, 0}
  end
  if claimed_by then
    return {0, 0, 0}
  end
  local forgotten = tonumber(state[2])
  if forgotten and requested <= forgotten then
    return {0, 0, 0}
  end
  if now - requested > grace then
    return {9, now - requested, 0}
  end
  if not redis.call('SET', lock, token, 'NX', 'PX', px) then
    return {1, 1, 0}
  end
  local fence = math.max((tonumber(state[1]) or 0) + 1, now_us)
  local cut = '(' .. string.format('%.0f', now - math.max(grace, RUNS_KEPT_MS))
  local old = redis.call('ZRANGEBYSCORE', runs, '-inf', cut, 'WITHSCORES')
  if #old > 0 then
    for i = 1, #old, 2 do
      redis.call('HDEL', state_key, 'm:' .. old[i])
      forgotten = math.max(forgotten or tonumber(old[i + 1]), tonumber(old[i + 1]))
    end
    redis.call('ZREMRANGEBYSCORE', runs, '-inf', cut)
    redis.call('HSET', state_key, 'mf', string.format('%.0f', forgotten))
  end
  -- Kept for the grace from the later of its request and this claim: a claimant whose clock is
  -- behind stamps the request early, and it must not be forgotten early.
  redis.call('ZADD', runs, string.format('%.0f', math.max(requested, now)), id)
  redis.call('HSET', state_key, 'fence', string.format('%.0f', fence), 'm:' .. id, token)
  return {2, fence, 0}
end

local function release(lock, cancel, token)
  if redis.call('GET', lock) == token then
    return {redis.call('DEL', lock, cancel)}
  end
  return {0}
end

local function renew(lock, cancel, token, px)
  if redis.call('GET', lock) == token then
    redis.call('PEXPIRE', lock, px)
    if redis.call('GET', cancel) == token then
      return {2}
    end
    return {1}
  end
  return {0}
end

-- If this claimant's claim of the fire took effect, its lock is freed and, when it is the last
-- claimed fire, it is recorded as not started (`lapsed`).
local function abandon(lock, state_key, cancel, fire_arg, token)
  local state = redis.call('HMGET', state_key, 'last', 'holder')
  local fire = tonumber(fire_arg)
  local last = tonumber(state[1])
  local ours = (last == fire and state[2] == token) or recent_claimant(state_key, fire) == token
  if not ours then
    -- The claim has not arrived (it may still, after a reconnection): it will be refused. The
    -- newest eight such claims are kept.
    local kept = {token}
    for t in string.gmatch(redis.call('HGET', state_key, 'ab') or '', '%S+') do
      if #kept < 8 and t ~= token then kept[#kept + 1] = t end
    end
    redis.call('HSET', state_key, 'ab', table.concat(kept, ' '))
    return {0}
  end
  if last == fire then
    redis.call('HSET', state_key, 'lapsed', fire_arg)
  end
  if redis.call('GET', lock) == token then
    redis.call('DEL', lock, cancel)
  end
  return {1}
end

-- `1` when this guard value is the first to report the fire (also when it asks again); `0` for a
-- fire another reported first, or reported missed; `2` for a fire another claimant's claim took
-- (it ran there, or that claimant reports it): nothing is recorded. A fire further ahead of the
-- server's clock than a claim may be comes from a host whose clock is ahead: it reports on its own
-- word, and nothing is recorded.
local function first_report(report, state_key, nonce, ttl, fire_arg)
  local fire = tonumber(fire_arg)
  if fire > now + TOLERANCE_MS then
    return {1}
  end
  local state = redis.call('HMGET', state_key, 'rep', 'gone', 'last', 'holder', 'n', 'gf', 'gb')
  local last = tonumber(state[3])
  local claimed_by, oldest = false, nil
  if last == fire then
    claimed_by = state[4]
  elseif last and last > fire then
    claimed_by, oldest = recent_claimant(state_key, fire)
  end
  if claimed_by then
    if string.sub(claimed_by, 1, #nonce + 1) ~= nonce .. ':' then
      return {2}
    end
    -- Its own claim of the fire: the fire is this claimant's to report, whatever was recorded since.
    report_once(report, state_key, state[1], fire, nonce, ttl)
    return {1}
  end
  -- Reported missed: a fire nobody claimed, as a claim tells it (a claimed fire the ring forgot
  -- is not; its report is recorded). Its own report first (a busy answer it never got), as the
  -- missed fires recorded after it.
  local unclaimed = not last or fire > last or (tonumber(state[5]) or 0) <= 8
    or (oldest and fire > oldest)
  if reported_missed(tonumber(state[2]), tonumber(state[6]), tonumber(state[7]), fire) and unclaimed
     and redis.call('GET', report) ~= nonce then
    return {0}
  end
  return {report_once(report, state_key, state[1], fire, nonce, ttl)}
end

-- The fate point: the newest fire claimed (also one given up), reported or reported missed. Also
-- a value ahead of the server's clock: claims and reports that far ahead are refused, so it was
-- written before the server's clock was set back, and the fires up to it were decided then.
local function fate_point(state_key)
  local state = redis.call('HMGET', state_key, 'last', 'rep', 'gone')
  local point = nil
  for i = 1, 3 do
    local v = tonumber(state[i])
    if v and (not point or v > point) then point = v end
  end
  return point
end

local function point_answer(point)
  if point then
    return {1, point}
  end
  return {0}
end

-- Records the fires from `first` to `last` as missed unless the fate point is at `last` already;
-- answers the point as it was. A `last` ahead of the server's clock comes from a clock that is
-- wrong. The answer is kept under `answer_key` (one per guard value and `last`): a retry whose
-- first try took effect unheard is answered the same, also after other processes moved the point.
local function report_missed(state_key, answer_key, first_arg, last_arg, tolerance, ttl)
  local kept = redis.call('GET', answer_key)
  if kept then
    return point_answer(tonumber(kept))
  end
  local last = tonumber(last_arg)
  -- Fires whose grace has not passed by the server's clock come from a host whose clock is
  -- ahead: recorded, they would move the fate point past fires still open elsewhere.
  if last > now + tonumber(tolerance) then
    return {-1, 'the missed fires are not past their misfire grace by the Redis server\'s clock: this host\'s clock is ahead; they were not recorded'}
  end
  local point = fate_point(state_key)
  redis.call('SET', answer_key, point and string.format('%.0f', point) or '-', 'PX', ttl)
  if not point or point < last then
    -- The fires recorded are those after the fate point from `first` on (`gf`: after it): a fire
    -- before `first` still open in a process is that process's to decide, and the fires between
    -- the missed ones before (`gb`) and `gf` were not reported missed. A report that goes on
    -- from the missed fires before extends them.
    local from = tonumber(first_arg) - 1
    if point and point > from then
      from = point
    end
    local gone = tonumber(redis.call('HGET', state_key, 'gone'))
    if gone and point == gone and from == point then
      redis.call('HSET', state_key, 'gone', last_arg)
    else
      redis.call('HSET', state_key, 'gone', last_arg, 'gf', string.format('%.0f', from))
      if gone then
        redis.call('HSET', state_key, 'gb', string.format('%.0f', gone))
      else
        redis.call('HDEL', state_key, 'gb')
      end
    end
  end
  return point_answer(point)
end

-- Records a history entry, its end by the server's clock first. Past the newest `kept` by fire, the
-- oldest are dropped, with those older than `retention` ms; the key goes `retention` after its
-- last entry.
local function history(key, fire_arg, entry, kept_arg, retention_arg)
  local kept = tonumber(kept_arg)
  redis.call('ZADD', key, fire_arg, string.format('%.0f', now) .. '\t' .. entry)
  if redis.call('ZCARD', key) > kept then
    redis.call('ZREMRANGEBYRANK', key, 0, -(kept + 1))
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. string.format('%.0f', now - tonumber(retention_arg)))
  end
  redis.call('PEXPIRE', key, retention_arg)
  return {1}
end

local out = {}
local k, a = 1, 1
while a <= #ARGV do
  local code = ARGV[a]
  local ok, res
  if code == 'c' then
    ok, res = pcall(claim, KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], ARGV[a + 1], ARGV[a + 2],
      ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7], ARGV[a + 8])
    k, a = k + 4, a + 9
  elseif code == 'r' then
    ok, res = pcall(release, KEYS[k], KEYS[k + 1], ARGV[a + 1])
    k, a = k + 2, a + 2
  elseif code == 'n' then
    ok, res = pcall(renew, KEYS[k], KEYS[k + 1], ARGV[a + 1], ARGV[a + 2])
    k, a = k + 2, a + 3
  elseif code == 'a' then
    ok, res = pcall(abandon, KEYS[k], KEYS[k + 1], KEYS[k + 2], ARGV[a + 1], ARGV[a + 2])
    k, a = k + 3, a + 3
  elseif code == 'm' then
    ok, res = pcall(manual, KEYS[k], KEYS[k + 1], KEYS[k + 2], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3],
      ARGV[a + 4], ARGV[a + 5])
    k, a = k + 3, a + 6
  elseif code == 'f' then
    ok, res = pcall(first_report, KEYS[k], KEYS[k + 1], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3])
    k, a = k + 2, a + 4
  elseif code == 'p' then
    ok, res = pcall(function(key) return point_answer(fate_point(key)) end, KEYS[k])
    k, a = k + 1, a + 1
  elseif code == 'g' then
    ok, res = pcall(report_missed, KEYS[k], KEYS[k + 1], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3],
      ARGV[a + 4])
    k, a = k + 2, a + 5
  elseif code == 'h' then
    ok, res = pcall(history, KEYS[k], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4])
    k, a = k + 1, a + 5
  else
    return redis.error_reply('unknown cronguard operation ' .. tostring(code))
  end
  if not ok then
    if type(res) == 'table' and res.err then res = res.err end
    res = tostring(res)
    -- A node that takes no writes (a demoted primary, too few replicas) refuses every operation:
    -- the whole call fails with its error, so that the connection can find the new primary.
    if string.find(res, '^READONLY') or string.find(res, '^NOREPLICAS') then
      return redis.error_reply(res)
    end
    res = {-1, res}
  end
  out[#out + 1] = res
end
return out
"#;

#[cfg(test)]
mod tests {
    #[test]
    fn the_script_tolerates_what_the_guard_does() {
        let line = format!(
            "local TOLERANCE_MS = {}",
            super::super::CLAIM_AHEAD_TOLERANCE.as_millis()
        );
        assert!(super::BATCH_LUA.contains(&line), "{line}");
        let line = format!(
            "local RUNS_KEPT_MS = {}",
            crate::guard::MANUAL_RUNS_KEPT.as_millis()
        );
        assert!(super::BATCH_LUA.contains(&line), "{line}");
    }
}
