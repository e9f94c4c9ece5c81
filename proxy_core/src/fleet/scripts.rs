//! The Lua scripts that change the fleet's shared counts in Redis, each one atomic, each on the
//! Redis host's clock (`TIME`), so replicas with skewed clocks agree. Every write carries an
//! expiry, set in the same script as the write (an increment without its expiry would outlive
//! its purpose).
//!
//! Key layout, under the configured prefix `P`:
//! - `P:b:SCOPE:KIND` a GCRA bucket (RPM or TPM): its theoretical arrival time in microseconds.
//! - `P:c:SCOPE` concurrency: a hash replica -> slots it holds.
//! - `P:alive` replicas' heartbeats: a sorted set replica -> expiry (ms); the slots of a replica
//!   whose heartbeat lapsed are dropped by the next acquisition.
//! - `P:q:SCOPE:PERIOD` a quota period's use: hash `t` (tokens), `c` (cost micro-units), created
//!   from the SQL ledger's figure by the first replica that reserves in the period.

use redis::Script;

/// Lease up to `want` (at least `need`) tokens from a GCRA bucket: returns {granted, wait_us}.
/// ARGV: interval_us (per token), burst (tokens), want, need.
pub const BUCKET_LEASE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local need = tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local room = math.floor((now + burst * interval - tat) / interval)
local grant = math.min(want, room)
if grant < need then
  return {0, math.ceil(tat + need * interval - now - burst * interval)}
end
local new_tat = tat + grant * interval
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1000)
return {grant, 0}
";

/// Give back `count` unused tokens. ARGV: interval_us, count.
pub const BUCKET_RETURN: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat <= now then return 0 end
local new_tat = math.max(now, tat - tonumber(ARGV[1]) * tonumber(ARGV[2]))
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1000)
return 1
";

/// Acquire up to `want` concurrency slots for `replica` within `limit` across live replicas:
/// returns the slots granted. KEYS: scope hash, alive set. ARGV: replica, want, limit.
pub const SLOTS_ACQUIRE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local held = redis.call('HGETALL', KEYS[1])
local total = 0
for i = 1, #held, 2 do
  local replica = held[i]
  local alive = redis.call('ZSCORE', KEYS[2], replica)
  if replica ~= ARGV[1] and (not alive or tonumber(alive) < now) then
    redis.call('HDEL', KEYS[1], replica)
  else
    total = total + tonumber(held[i + 1])
  end
end
local grant = math.min(tonumber(ARGV[2]), tonumber(ARGV[3]) - total)
if grant <= 0 then return 0 end
redis.call('HINCRBY', KEYS[1], ARGV[1], grant)
redis.call('PEXPIRE', KEYS[1], 86400000)
return grant
";

/// Give back `count` slots of `replica`. KEYS: scope hash. ARGV: replica, count.
pub const SLOTS_RELEASE: &str = r"
local left = redis.call('HINCRBY', KEYS[1], ARGV[1], -tonumber(ARGV[2]))
if left <= 0 then redis.call('HDEL', KEYS[1], ARGV[1]) end
return left
";

/// Say how many slots `replica` holds (after Redis lost its data, or to repair a drift).
/// KEYS: scope hash. ARGV: replica, count.
pub const SLOTS_SET: &str = r"
if tonumber(ARGV[2]) <= 0 then redis.call('HDEL', KEYS[1], ARGV[1]) return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], 86400000)
return tonumber(ARGV[2])
";

/// The replica is alive for `ttl_ms` more; replicas dead for an hour are forgotten.
/// KEYS: alive set. ARGV: replica, ttl_ms.
pub const HEARTBEAT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 3600000)
redis.call('PEXPIRE', KEYS[1], 86400000)
return now
";

/// Reserve a chunk of a quota period: up to `want` tokens and cost, at least `need` of each, or
/// nothing. Limits of -1 are absent. A missing period hash (a new period, or a Redis that lost its
/// data) starts from `floor`: the larger of the SQL ledger's figure and what this replica last
/// knew of the period's use, so a restarted Redis never forgets spend the replicas saw.
/// Returns {tokens granted, cost granted, tokens used, cost used} (after the grant).
/// ARGV: limit_t, limit_c, need_t, need_c, want_t, want_c, ledger_t, ledger_c, ttl_ms.
pub const QUOTA_LEASE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 't', ARGV[7], 'c', ARGV[8])
  redis.call('PEXPIRE', KEYS[1], ARGV[9])
end
local used_t = tonumber(redis.call('HGET', KEYS[1], 't') or '0')
local used_c = tonumber(redis.call('HGET', KEYS[1], 'c') or '0')
local function grant(limit, used, need, want)
  limit = tonumber(limit)
  if limit < 0 then return tonumber(want) end
  local room = limit - used
  if room < tonumber(need) then return -1 end
  return math.min(tonumber(want), room)
end
local gt = grant(ARGV[1], used_t, ARGV[3], ARGV[5])
local gc = grant(ARGV[2], used_c, ARGV[4], ARGV[6])
if gt < 0 or gc < 0 then return {0, 0, used_t, used_c} end
used_t = redis.call('HINCRBY', KEYS[1], 't', gt)
used_c = redis.call('HINCRBY', KEYS[1], 'c', gc)
return {gt, gc, used_t, used_c}
";

/// Change a quota period's use by a signed amount: give back an unused chunk (negative) or charge
/// use beyond what was reserved (positive). A missing count (a Redis that lost its data) starts
/// from `floor`: what this replica estimates the period's use to be, erring high.
/// ARGV: tokens, cost, ttl_ms, floor_t, floor_c.
pub const QUOTA_ADJUST: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 't', ARGV[4], 'c', ARGV[5])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
local t = redis.call('HINCRBY', KEYS[1], 't', ARGV[1])
local c = redis.call('HINCRBY', KEYS[1], 'c', ARGV[2])
if t < 0 then redis.call('HSET', KEYS[1], 't', 0) end
if c < 0 then redis.call('HSET', KEYS[1], 'c', 0) end
return {t, c}
";

/// A quota period's use. Returns {tokens, cost} (0 when the period has no count yet).
pub const QUOTA_READ: &str = r"
return {tonumber(redis.call('HGET', KEYS[1], 't') or '0'), tonumber(redis.call('HGET', KEYS[1], 'c') or '0')}
";

/// The scripts, loaded once (invocations send their SHA and load them on `NOSCRIPT`).
pub struct Scripts {
    pub bucket_lease: Script,
    pub bucket_return: Script,
    pub slots_acquire: Script,
    pub slots_release: Script,
    pub slots_set: Script,
    pub heartbeat: Script,
    pub quota_lease: Script,
    pub quota_adjust: Script,
    pub quota_read: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        Self {
            bucket_lease: Script::new(BUCKET_LEASE),
            bucket_return: Script::new(BUCKET_RETURN),
            slots_acquire: Script::new(SLOTS_ACQUIRE),
            slots_release: Script::new(SLOTS_RELEASE),
            slots_set: Script::new(SLOTS_SET),
            heartbeat: Script::new(HEARTBEAT),
            quota_lease: Script::new(QUOTA_LEASE),
            quota_adjust: Script::new(QUOTA_ADJUST),
            quota_read: Script::new(QUOTA_READ),
        }
    }
}
