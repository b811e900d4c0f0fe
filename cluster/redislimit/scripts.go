package redislimit

import "github.com/redis/go-redis/v9"

// Redis layout, per limit key (a group, or the global limit), all under one
// hash tag so that a cluster keeps them on one node:
//
//	PREFIX:{SCOPE:KEY}:l  sorted set: lease id -> expiry (ms, Redis TIME)
//	PREFIX:{SCOPE:KEY}:n  hash: lease id -> permits in the lease
//	PREFIX:{SCOPE:KEY}:f  the fencing counter
//	PREFIX:{SCOPE:KEY}:w  sorted set: holder id -> expiry, holders that wait
//
// Every change is one script, so it is atomic, and every script takes the
// time from Redis's TIME: no client clock is ever compared with another.

// acquireScript reaps expired leases, then grants a lease of between need
// and want permits if that many are free, with a fencing token greater than
// any issued for the key. The token is max(counter+1, TIME in µs), so that
// tokens keep rising across a restart of a Redis without persistence (the
// counter restarts from the clock) as long as fewer than a million are
// issued per second on average. A holder refused for lack of room is
// recorded as waiting for a TTL (a grant does not end that: one block may
// not be all it needs), which tells the others to give back what they hold
// above an even share of the limit; while others wait, a holder is not
// granted more than that share (and is not recorded as waiting for being
// refused more: it is not starved).
//
// A refusal is also published on the contention channel (ARGV[7]) as
// "holder_id|leases_key", so that the holders of the key learn at once that
// someone waits, rather than at their next renewal.
//
// KEYS: l n f w. ARGV: limit want need ttl_ms lease_id holder_id channel.
// Returns {granted, token, free_after, other_waiters}.
var acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, want, need, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, m in ipairs(expired) do redis.call('HDEL', KEYS[2], m) end
if #expired > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end
local used, mine = 0, 0
local all = redis.call('HGETALL', KEYS[2])
local me = ARGV[6] .. ':'
for i = 1, #all, 2 do
  local v = tonumber(all[i + 1])
  used = used + v
  if string.sub(all[i], 1, #me) == me then mine = mine + v end
end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local others = redis.call('ZCARD', KEYS[4])
if redis.call('ZSCORE', KEYS[4], ARGV[6]) then others = others - 1 end
local free = limit - used
if others > 0 then
  local fair = math.floor((limit + others) / (others + 1))
  if mine + need > fair then return {0, 0, free, others} end
  want = math.min(want, fair - mine)
end
if free < need then
  redis.call('ZADD', KEYS[4], now + ttl, ARGV[6])
  redis.call('PEXPIRE', KEYS[4], ttl * 2)
  redis.call('PUBLISH', ARGV[7], ARGV[6] .. '|' .. KEYS[1])
  return {0, 0, free, others}
end
local grant = math.min(want, free)
local tok = math.max(tonumber(redis.call('GET', KEYS[3]) or '0') + 1, nowus)
redis.call('SET', KEYS[3], string.format('%.0f', tok), 'PX', 86400000)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[5])
redis.call('HSET', KEYS[2], ARGV[5], grant)
redis.call('PEXPIRE', KEYS[1], ttl * 2)
redis.call('PEXPIRE', KEYS[2], ttl * 2)
return {grant, tok, free - grant, others}
`)

// renewScript extends each live lease named in ARGV by the TTL, lowers its
// permits to the size given with it if that is smaller (a give-back that
// failed, or whose reply was lost, is made good; never raised), and drops
// each lease that has expired. KEYS: l n w. ARGV: ttl_ms holder_id then
// id size pairs. Returns {other_waiters, alive_1, alive_2, ...} (1 alive, 0
// lost).
var renewScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local others = redis.call('ZCARD', KEYS[3])
if redis.call('ZSCORE', KEYS[3], ARGV[2]) then others = others - 1 end
local out = {others}
for i = 3, #ARGV, 2 do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) > now then
    redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i])
    local c = tonumber(redis.call('HGET', KEYS[2], ARGV[i]) or '0')
    local size = tonumber(ARGV[i + 1])
    if size > 0 and size < c then redis.call('HSET', KEYS[2], ARGV[i], size) end
    out[#out + 1] = 1
  else
    if s then redis.call('ZREM', KEYS[1], ARGV[i]) end
    redis.call('HDEL', KEYS[2], ARGV[i])
    out[#out + 1] = 0
  end
end
redis.call('PEXPIRE', KEYS[1], ttl * 2)
redis.call('PEXPIRE', KEYS[2], ttl * 2)
return out
`)

// releaseScript lowers a lease to left permits (gives it all back when left
// is 0). It sets a size rather than subtracting, so that a release sent
// twice (a retry after a lost reply, or the next renewal's size) gives back
// nothing twice, and it never raises a lease. KEYS: l n. ARGV: id left.
// Returns the permits left in the lease, or -1 if it was gone.
var releaseScript = redis.NewScript(`
local c = redis.call('HGET', KEYS[2], ARGV[1])
if not c then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return -1
end
local left = tonumber(ARGV[2])
if left <= 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
if left < tonumber(c) then
  redis.call('HSET', KEYS[2], ARGV[1], left)
  return left
end
return tonumber(c)
`)
