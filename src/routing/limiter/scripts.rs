//! The limiter's two Lua scripts: taking a permit and renewing the held ones. Each runs whole
//! on Redis, on Redis's clock.
//!
//! The permits are members of one sorted set (`KEYS[1]`), scored by when their leases end.
//! Beside them the set keeps two markers, scored past any lease's end so that neither is ever
//! counted or expired as a permit: `#gen`, its generation, one more at every call; and
//! `#run:ID`, the Redis server process (its `run_id`) that last wrote it. `KEYS[2]` holds when
//! the set was (re)born.
//!
//! The set may count fewer permits than attempts are running on: when it is new, or Redis lost
//! it (no generation: a restart without persistence, an eviction), when another server process
//! wrote it last (a restart or a failover: what that process kept may be behind the writes its
//! predecessor acknowledged, as when a snapshot is restored), or when its generation is behind
//! what this replica has seen of it (a restore on the same process). Then it is born again:
//! it gives no permit for `ARGV[3]` ms, the time every live replica takes to renew its own into
//! it, so the attempts still running count again before others start. Both keys live a day past
//! the last call, so a set in use is born once.
//!
//! The `run_id` is read with `INFO server`, which a Redis user with `-@dangerous` may not run.
//! Such a user's scripts still work, with no server process to tell apart (`#run:` alone): a
//! lost or older set is still found by its generation, a restart that restored a snapshot with
//! a generation ahead of what this replica saw is not.

use std::sync::OnceLock;

/// What both scripts begin with (`ARGV[2]` the lease in ms, `ARGV[4]` the generation this
/// replica has seen): Redis's now, the set's generation after this call (`gen`, offset by
/// `base`), whether its permits are settled, and `held()`, the permits it counts.
macro_rules! prelude {
    () => {
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
local base = 1125899906842624
local info = redis.pcall('INFO', 'server')
local run = '#run:' .. (type(info) == 'string' and string.match(info, 'run_id:(%w+)') or '')
local seen = tonumber(ARGV[4])
local gen = tonumber(redis.call('ZSCORE', KEYS[1], '#gen'))
local born = tonumber(redis.call('GET', KEYS[2]))
if not born or not gen or gen - base < seen or not redis.call('ZSCORE', KEYS[1], run) then
  born = now
  redis.call('SET', KEYS[2], now)
  redis.call('ZREMRANGEBYSCORE', KEYS[1], base, base)
  redis.call('ZADD', KEYS[1], base, run)
  gen = math.max(gen or base, base + seen)
end
gen = gen + 1
redis.call('ZADD', KEYS[1], gen, '#gen')
redis.call('PEXPIRE', KEYS[1], 86400000)
redis.call('PEXPIRE', KEYS[2], 86400000)
local settled = now - born >= tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local function held()
  return redis.call('ZCOUNT', KEYS[1], '-inf', '(1125899906842624')
end
"
    };
}

/// Removes this replica's released members (`ARGV[6 + n..]`, so a permit released here goes
/// to the next attempt in the same round trip) and the ended leases, then, if the permits are
/// settled, adds as many of the `n` new members `ARGV[6..5 + n]` (`n` is `ARGV[5]`) as fit
/// under the limit `ARGV[1]`, their leases ending `ARGV[2]` ms from Redis's now: a block of
/// permits for the attempts waiting at one replica, in one round trip. Returns `{taken (0 to
/// n), held, generation, ms until settled (0: settled)}`.
const TAKE: &str = concat!(
    prelude!(),
    r"
local n = tonumber(ARGV[5])
for i = 6 + n, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
end
local count = held()
if not settled then
  return {0, count, gen - base, born + tonumber(ARGV[3]) - now}
end
local taken = math.max(0, math.min(n, tonumber(ARGV[1]) - count))
for i = 6, 5 + taken do
  redis.call('ZADD', KEYS[1], now + lease, ARGV[i])
end
return {taken, count + taken, gen - base, 0}
"
);

/// Extends this replica's leases (`ARGV[5..]`) by `ARGV[2]` ms; a lease that ended meanwhile
/// (renewals that did not get through, or a set Redis lost) is taken again if fewer than
/// `ARGV[1]` are held, else it is lost. Returns `{held, {lost members}, generation}`.
const RENEW: &str = concat!(
    prelude!(),
    r"
local lost = {}
for i = 5, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) or held() < tonumber(ARGV[1]) then
    redis.call('ZADD', KEYS[1], now + lease, ARGV[i])
  else
    table.insert(lost, ARGV[i])
  end
end
return {held(), lost, gen - base}
"
);

static TAKE_SCRIPT: OnceLock<redis::Script> = OnceLock::new();
static RENEW_SCRIPT: OnceLock<redis::Script> = OnceLock::new();

/// The take, hashed once.
pub(super) fn take() -> &'static redis::Script {
    TAKE_SCRIPT.get_or_init(|| redis::Script::new(TAKE))
}

/// The renewal, hashed once.
pub(super) fn renew() -> &'static redis::Script {
    RENEW_SCRIPT.get_or_init(|| redis::Script::new(RENEW))
}
