package redislimit

import "github.com/redis/go-redis/v9"

// Redis layout, per limit key (a group, or the global limit), all under one
// hash tag so that a cluster keeps them on one node:
//
//	PREFIX:{SCOPE:KEY}:l  sorted set: lease id -> expiry (ms, Redis TIME)
//	PREFIX:{SCOPE:KEY}:n  hash: lease id -> permits in the lease
//	PREFIX:{SCOPE:KEY}:s  hash: lease id -> its slots, "3,7,8"
//	PREFIX:{SCOPE:KEY}:b  bitmap: bit i set while slot i is leased
//	PREFIX:{SCOPE:KEY}:f  the fencing counter
//	PREFIX:{SCOPE:KEY}:w  sorted set: holder id -> expiry, holders that wait
//	PREFIX:{SCOPE:KEY}:g  hash: holder id -> when it was last served (ms)
//	PREFIX:{SCOPE:KEY}:q  hash: holder id -> the permits it waits for and its process's nonce, "2 nonce"
//	PREFIX:{SCOPE:KEY}:r  hash: "holder id|nonce" -> that process's latest request run, "seq ms"
//	PREFIX:{SCOPE:KEY}:v  the version counter of what Redis tells of the shares
//
// KEY is the executor's key as it is, up to 200 bytes; a longer one is its
// first 200 bytes, '#' and the hex SHA-256 of the whole key (keyName).
//
// A lease id starts with its holder's id and ':'. Every change is one
// script, so it is atomic, and every script takes the time from Redis's
// TIME: no client clock is ever compared with another.
//
// Versions. What a reply or a notice tells a holder of the shares (who
// waits, its cap) is as of a version of the key, greater for everything
// told later: replies and notices come by different connections and
// nothing orders them, so a holder keeps what it heard with the greatest
// version and ignores older news. Like a fencing token, the version is
// max(counter+1, TIME in µs), so that it keeps rising across a restart of a
// Redis without persistence, and once the counter has expired.
//
// Expiry. Every key of a limit key expires at most twice the TTL after the
// last call that wrote it, the counters (f, v) too: group keys are often
// made up by clients (a tenant header), and each one ever seen must not
// cost Redis memory for longer than its leases and waiting records live.
// A counter that has expired restarts from the clock, as after a restart.
//
// Requests. A holder's acquires and unwaits (below) of a key are numbered
// in the order it sends them (its process's nonce and a sequence number),
// and Redis keeps the latest one it has run per process of the holder (r).
// A call the holder gave up on (the op timeout) may still reach Redis after
// a later one: an acquire older than the latest run does nothing (a later
// one counts, or an unwait ended the wait it asked for), and an unwait
// older than the latest run ends nothing (the record is a later acquire's,
// and the holder waits again). The give-back of a lease whose acquire's
// reply the holder never had counts that acquire as run (releaseScript).
//
// Nothing orders the calls of two processes of one holder id (a process
// restarted with it: WithHolderID), and a late call of the old one may
// reach Redis after the new one's: so a waiting record (w, q) is its
// process's, the one whose nonce q keeps. A call of another process of the
// id neither refreshes, changes nor ends it: its refusal records nothing,
// its grant ends no wait and marks no one served, its unwait ends nothing.
// A record left by a process that is gone expires (within two renew
// intervals of its last refusal), as a crashed holder's does, and the new
// process's next refusal records its own.
//
// Slots. A key of limit N has slots 0..N-1, and every leased permit is one
// of them: a lease holds as many slots as permits, and a slot is in at most
// one live lease. A slot leased again after its lease was lost (expired, or
// given back) comes with a greater fencing token: slot by slot, the tokens
// fence as a limit-1 key's do (see Fencing).
//
// Shares. While a holder waits (it was refused a block within the last TTL),
// the limit is split between the contenders: every holder that holds
// permits of the key or waits for some. The split is max-min fair: a
// contender that does not wait keeps what it holds if that is no more than
// an even split of what the others leave, and what is left then still fits
// the heaviest weight waited for; the rest is split evenly between the
// others. What does not split evenly goes to the contenders that have gone
// longest without being served (a grant, or a give-back, marks a holder
// served; one above the even split counts as being served now), those that
// wait first, one permit each; the first of them is given at least the
// weight it waits for, so that a task heavier than an even share is not
// starved (not even behind a holder that keeps its even split busy with
// light tasks, and so never waits or gives back). So with limit 1 a
// permit freed while another holder waits goes to it: two holders that
// each wait while the other holds it take it in turn. Each holder is
// told its share (its cap) in every reply and in every contention notice,
// and how many holders are deprived: waiting for room within their cap
// while they hold less than an even split. It is granted no more than its
// cap while others wait, gives back what it holds above it once its
// quantum (the renew interval) from its last grant is over, and, while
// someone is deprived, the permits no task of it has used for a poll
// interval (share.go).
//
// Notices. What a script tells of the shares it publishes on the
// contention channel (PREFIX:contention) as
// "c|holder_id|leases_key|version|holder=cap[w|d],...": the holder whose
// call published it, the key, the version, then every contender with its
// cap, followed by 'w' if it waits, or 'd' if it waits deprived (nothing:
// it holds permits and does not wait); with no contender, nobody waits.
// Each listener reads there what a reply to a call of its own tells it:
// how many holders other than itself wait, how many of those are
// deprived, and its cap. A refusal lists its holder as waiting; a grant
// does not list it so (its wait ended), and the holders still waiting may
// be the listener alone, which then counts no one. A notice of an older
// build ("w|..."), which did not say who waits, is ignored (as a notice
// missed): its holders' next renewal rounds tell the shares. "f|leases_key"
// says that permits were freed while holders wait (contention.go).

// Failures. Redis does not roll back a script that fails midway: the
// writes it made before the failing command stay. A key under the prefix
// holding a value of another type (written by something else) would make
// a command on it fail, maybe after the script's first write: an acquire
// could leave a slot's bit set for a lease it never recorded (lost to
// every holder until the key expires), or a renewal extend leases whose
// holder hears only the error. So every script first checks the type of
// each key it touches, and that the numbers it reads as such are numbers,
// and refuses (WRONGTYPE, or ERR) before it writes anything.

// sharesLua is the code the scripts share.
const sharesLua = `
-- check returns the error a script must refuse with, before its first
-- write, or nil: types gives the type of each of KEYS (false: a key it
-- does not touch), numbers the KEYS whose values it reads as numbers (a
-- string's, or every field's of a hash). The error quotes at most the
-- first 64 bytes of a value that is no number: written by something
-- else, it may be of any length, and the holder carries the error in
-- every refusal of the key's tasks.
local function check(types, numbers)
  for i, want in ipairs(types) do
    local got = redis.call('TYPE', KEYS[i])['ok']
    if want and got ~= 'none' and got ~= want then
      return 'WRONGTYPE ' .. KEYS[i] .. ' holds a ' .. got .. ', not a ' .. want
    end
  end
  for _, i in ipairs(numbers) do
    local vs = {}
    if types[i] == 'hash' then vs = redis.call('HVALS', KEYS[i]) else vs = {redis.call('GET', KEYS[i])} end
    for _, v in ipairs(vs) do
      if v and not tonumber(v) then
        local shown = string.format('%q', string.sub(v, 1, 64))
        if #v > 64 then shown = shown .. '... (' .. #v .. ' bytes)' end
        return 'ERR ' .. KEYS[i] .. ' holds ' .. shown .. ', not a number'
      end
    end
  end
  return nil
end

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function owner(id) return string.match(id, '^([^:]*):') end

-- version bumps the key's version counter (v) and returns it. The counter
-- expires with the key's other keys, keep ms after the call: the clock
-- orders the versions after that.
local function version(v, nowus, keep)
  local x = math.max(tonumber(redis.call('GET', v) or '0') + 1, nowus)
  redis.call('SET', v, string.format('%.0f', x), 'PX', keep)
  return x
end

-- latest returns the sequence number of the latest request of holder me's
-- process nonce that Redis has run for the key (r), or -1: none. Each
-- process of a holder id (one restarted with it) has its own.
local function latest(r, me, nonce)
  local v = redis.call('HGET', r, me .. '|' .. nonce)
  if v then return tonumber(string.match(v, '^(%d+) ')) end
  return -1
end

-- ran records that Redis has run request seq of me's process nonce, and
-- forgets the requests run more than keep ms ago: one given up on reaches
-- Redis long before.
local function ran(r, me, nonce, seq, now, keep)
  redis.call('HSET', r, me .. '|' .. nonce, string.format('%.0f', seq) .. ' ' .. string.format('%.0f', now))
  local all = redis.call('HGETALL', r)
  for i = 1, #all, 2 do
    local at = tonumber(string.match(all[i + 1], ' (%d+)$') or '0')
    if at < now - keep then redis.call('HDEL', r, all[i]) end
  end
  redis.call('PEXPIRE', r, keep)
end

-- mine reports whether holder me's waiting record (w, q), if it has a live
-- one, is that of its process nonce: a process of the holder id refreshes,
-- changes and ends only its own record, never one that another process of
-- the id made (which may be newer: nothing orders two processes' calls).
local function mine(w, q, me, nonce, now)
  local till = redis.call('ZSCORE', w, me)
  if not till or tonumber(till) <= now then return true end
  local by = string.match(redis.call('HGET', q, me) or '', '^%d+ (%S+)$')
  return by == nil or by == nonce
end

-- drop_slots frees the slots of lease id, and returns how many it freed.
local function drop_slots(s, b, id)
  local list = redis.call('HGET', s, id)
  local freed = 0
  if list then
    for x in string.gmatch(list, '%d+') do
      redis.call('SETBIT', b, tonumber(x), 0)
      freed = freed + 1
    end
    redis.call('HDEL', s, id)
  end
  return freed
end

-- reap drops the expired leases, and returns how many slots it freed.
local function reap(l, n, s, b, now)
  local expired = redis.call('ZRANGEBYSCORE', l, '-inf', now)
  local freed = 0
  for _, id in ipairs(expired) do
    freed = freed + drop_slots(s, b, id)
    redis.call('HDEL', n, id)
  end
  if #expired > 0 then redis.call('ZREMRANGEBYSCORE', l, '-inf', now) end
  return freed
end

-- keep_only lowers lease id to the slots of list that it holds (never
-- raises it), freeing the others; it drops the lease when none is left.
-- It returns the permits left and the permits freed.
local function keep_only(l, n, s, b, id, list)
  local stored = redis.call('HGET', s, id)
  if not stored then return 0, 0 end
  local want = {}
  for x in string.gmatch(list, '%d+') do want[x] = true end
  local kept, freed = {}, 0
  for x in string.gmatch(stored, '%d+') do
    if want[x] then kept[#kept + 1] = x else
      redis.call('SETBIT', b, tonumber(x), 0)
      freed = freed + 1
    end
  end
  if #kept == 0 then
    redis.call('HDEL', s, id)
    redis.call('HDEL', n, id)
    redis.call('ZREM', l, id)
  elseif freed > 0 then
    redis.call('HSET', s, id, table.concat(kept, ','))
    redis.call('HSET', n, id, #kept)
  end
  return #kept, freed
end

-- shares returns the permits leased, each holder's permits, how many
-- holders other than me wait, each contender's cap (nil when nobody
-- waits), how many holders other than me are deprived (below), whether me
-- is, and the state of each holder that waits ('w', or 'd': deprived), me
-- included. asking: me is asking now for need permits (it counts as
-- waiting).
local function shares(n, w, g, q, limit, me, now, asking, need)
  redis.call('ZREMRANGEBYSCORE', w, '-inf', now)
  local waiting, others = {}, 0
  for _, h in ipairs(redis.call('ZRANGE', w, 0, -1)) do
    waiting[h] = true
    if h ~= me then others = others + 1 end
  end
  if asking then waiting[me] = true end
  local hold, used = {}, 0
  if next(waiting) == nil then return used, hold, others, nil, 0, false, {} end
  local all = redis.call('HGETALL', n)
  for i = 1, #all, 2 do
    local h, v = owner(all[i]), tonumber(all[i + 1])
    used = used + v
    hold[h] = (hold[h] or 0) + v
  end
  local served, wants = {}, {}
  local gs = redis.call('HGETALL', g)
  for i = 1, #gs, 2 do
    if hold[gs[i]] or waiting[gs[i]] then served[gs[i]] = tonumber(gs[i + 1]) else redis.call('HDEL', g, gs[i]) end
  end
  local qs = redis.call('HGETALL', q)
  for i = 1, #qs, 2 do
    if waiting[qs[i]] then wants[qs[i]] = tonumber(string.match(qs[i + 1], '^%d+')) else redis.call('HDEL', q, qs[i]) end
  end
  if asking then wants[me] = math.max(wants[me] or 0, need) end
  local cs = {}
  for h in pairs(hold) do cs[#cs + 1] = h end
  for h in pairs(waiting) do if not hold[h] then cs[#cs + 1] = h end end
  -- Those that do not wait first, smallest first: each keeps what it holds
  -- while that is no more than an even split of what is left.
  table.sort(cs, function(a, b)
    local da, db = waiting[a] and math.huge or hold[a], waiting[b] and math.huge or hold[b]
    if da ~= db then return da < db end
    return a < b
  end)
  -- A holder that does not wait keeps what it holds only if what is left
  -- still fits the heaviest weight waited for: else a task heavier than
  -- an even split waits behind it for as long as it stays busy.
  local heaviest = 0
  for h in pairs(waiting) do heaviest = math.max(heaviest, wants[h] or 1) end
  local caps, pool, m, rest = {}, limit, #cs, {}
  for _, h in ipairs(cs) do
    if #rest == 0 and not waiting[h] and hold[h] * m <= pool and pool - hold[h] >= heaviest then
      caps[h] = hold[h]
      pool, m = pool - hold[h], m - 1
    else
      rest[#rest + 1] = h
    end
  end
  -- The rest split the pool evenly; what does not split goes, one each,
  -- to those served longest ago (those above the split count as served
  -- now), and the first of them gets at least what it waits for.
  local fl = math.floor(pool / #rest)
  table.sort(rest, function(a, b)
    local ua, ub = (hold[a] or 0) > fl, (hold[b] or 0) > fl
    if ua ~= ub then return ub end
    -- Then those that wait: one that does not wants nothing more.
    if waiting[a] ~= waiting[b] then return waiting[a] == true end
    local sa, sb = served[a] or now, served[b] or now
    if sa ~= sb then return sa < sb end
    return a < b
  end)
  local head = rest[1]
  local hc = fl
  if pool > fl * #rest then hc = fl + 1 end
  if waiting[head] and (wants[head] or 0) > hc then hc = math.min(wants[head], pool) end
  caps[head] = hc
  pool = pool - hc
  if #rest > 1 then
    local f2 = math.floor(pool / (#rest - 1))
    local extra = pool - f2 * (#rest - 1)
    for i = 2, #rest do
      caps[rest[i]] = f2
      if i - 1 <= extra then caps[rest[i]] = f2 + 1 end
    end
  end
  -- Deprived: waiting for room within its cap while it holds less than an
  -- even split (or nothing). The one permit more that the first in line
  -- may have comes to it as the others' quantum ends, not from their idle
  -- permits: so it does not pull permits around at each grant.
  local deprived, medeprived, states = 0, false, {}
  for h in pairs(waiting) do
    local hh = hold[h] or 0
    states[h] = 'w'
    if hh < math.max(fl, 1) and hh + math.max(wants[h] or 1, 1) <= caps[h] then
      states[h] = 'd'
      if h == me then medeprived = true else deprived = deprived + 1 end
    end
  end
  return used, hold, others, caps, deprived, medeprived, states
end

-- notice is the contention notice "c|me|leases_key|version|shares" (see
-- Notices): shares lists each contender as holder=cap, followed by 'w' if
-- it waits, 'd' if it waits deprived; empty, nobody waits.
local function notice(me, l, ver, caps, states)
  local out = {}
  for h, c in pairs(caps or {}) do out[#out + 1] = h .. '=' .. c .. (states[h] or '') end
  return 'c|' .. me .. '|' .. l .. '|' .. string.format('%.0f', ver) .. '|' .. table.concat(out, ',')
end
`

// acquireScript reaps expired leases, then grants a lease of between need
// and want permits (slots) if that many are free and the holder's share
// allows it, with a fencing token greater than any issued for the key. The
// token is max(counter+1, TIME in µs), so that tokens keep rising across a
// restart of a Redis without persistence, and once the counter has expired
// with the key's other keys (see Expiry: it restarts from the clock), as
// long as fewer than a million are issued per second on average.
//
// A request older than the latest of the holder that Redis has run (see
// Requests), or that very one sent again (a client that retries after a
// lost reply), does nothing: it returns a refusal of version 0, and is not
// recorded. The holder takes it for a lost reply (refilledLocked): the
// first run may have granted a lease, which it gives back by its id.
//
// A refused holder, for lack of room or for its share, is recorded as
// waiting for wait_ms (with the weight it waits for now, need: a heavier
// task it asked for before may be gone, and its process's nonce), unless
// another process of its id has a record (see Requests): a holder that
// still waits asks again at least once per renew interval, and one that no
// longer does drops out soon after. The refusal is published on the
// contention channel (ARGV[7]) as a notice of the shares (see Notices), so
// that the holders of the key learn at once who waits, who of them waits
// for room below its cap, and what each may keep. A grant ends the
// holder's wait and marks it served (unless the record is another
// process's); while others wait, it is published the same way, since it
// changes their caps; when it ended the last wait, it is published with no
// contender (nobody waits, as unwaitScript publishes it), so that the
// holders of the key keep their permits again.
//
// When it reaped expired leases (a crashed or cut-off holder's) and some
// of their slots are still free after the grant or refusal while others
// wait, it also publishes "f|leases_key", as releaseScript does: a holder
// refused for room, whose cap does not change, hears of them only so, and
// not at its next renewal round.
//
// KEYS: l n s b f w g q r v. ARGV: limit want need ttl_ms lease_id
// holder_id channel wait_ms nonce seq. Returns {granted, token, free_after,
// other_waiters, cap, deprived, version, slot...}; cap is the most the
// holder may keep (the limit when nobody else waits), deprived how many
// others wait below their cap.
var acquireScript = redis.NewScript(sharesLua + `
local bad = check({'zset', 'hash', 'hash', 'string', 'string', 'zset', 'hash', 'hash', 'hash', 'string'}, {2, 5, 10})
if bad then return redis.error_reply(bad) end
local now, nowus = clock()
local limit, want, need, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local me, nonce, seq = ARGV[6], ARGV[9], tonumber(ARGV[10])
if latest(KEYS[9], me, nonce) >= seq then return {0, 0, 0, 0, limit, 0, 0} end
ran(KEYS[9], me, nonce, seq, now, ttl * 2)
local own = mine(KEYS[6], KEYS[8], me, nonce, now)
local ver = version(KEYS[10], nowus, ttl * 2)
local reaped = reap(KEYS[1], KEYS[2], KEYS[3], KEYS[4], now)
local used, hold, others, caps, deprived, medeprived, states = shares(KEYS[2], KEYS[6], KEYS[7], KEYS[8], limit, me, now, true, need)
local mine, free, cap = hold[me] or 0, limit - used, limit
if others > 0 then cap = caps[me] end
local grant = 0
if mine + need <= cap and free >= need then grant = math.min(want, cap - mine, free) end
local slots = {}
if grant > 0 then
  for _ = 1, grant do
    local pos = redis.call('BITPOS', KEYS[4], 0)
    if pos < 0 or pos >= limit then break end
    redis.call('SETBIT', KEYS[4], pos, 1)
    slots[#slots + 1] = pos
  end
  if #slots < need then
    for _, x in ipairs(slots) do redis.call('SETBIT', KEYS[4], x, 0) end
    slots = {}
  end
end
if #slots == 0 then
  if own then
    redis.call('ZADD', KEYS[6], now + tonumber(ARGV[8]), me)
    redis.call('HSETNX', KEYS[7], me, now)
    redis.call('HSET', KEYS[8], me, string.format('%.0f', need) .. ' ' .. nonce)
    for i = 6, 8 do redis.call('PEXPIRE', KEYS[i], ttl * 2) end
  end
  -- Deprived only when refused for room: free >= need, it was refused
  -- for lack of free slots (the bitmap did not match the counts).
  if medeprived and free >= need then states[me] = 'w' end
  redis.call('PUBLISH', ARGV[7], notice(me, KEYS[1], ver, caps, states))
  if reaped > 0 and free > 0 and others > 0 then
    redis.call('PUBLISH', ARGV[7], 'f|' .. KEYS[1])
  end
  return {0, 0, free, others, cap, deprived, ver}
end
grant = #slots
local tok = math.max(tonumber(redis.call('GET', KEYS[5]) or '0') + 1, nowus)
redis.call('SET', KEYS[5], string.format('%.0f', tok), 'PX', ttl * 2)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[5])
redis.call('HSET', KEYS[2], ARGV[5], grant)
redis.call('HSET', KEYS[3], ARGV[5], table.concat(slots, ','))
local waited = false
if own then
  waited = redis.call('ZREM', KEYS[6], me) > 0
  redis.call('HDEL', KEYS[8], me)
  redis.call('HSET', KEYS[7], me, now)
  redis.call('PEXPIRE', KEYS[7], ttl * 2)
end
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ttl * 2) end
local _, _, others2, caps2, deprived2, _, states2 = shares(KEYS[2], KEYS[6], KEYS[7], KEYS[8], limit, me, now, false, 0)
local cap2 = limit
if others2 > 0 then
  cap2 = caps2[me]
  -- The grant moved this holder to the back of the line: the others' caps
  -- changed too.
  redis.call('PUBLISH', ARGV[7], notice(me, KEYS[1], ver, caps2, states2))
  if reaped > 0 and free > grant then
    redis.call('PUBLISH', ARGV[7], 'f|' .. KEYS[1])
  end
elseif waited then
  -- The grant ended the last wait: nobody waits any more (as unwaitScript
  -- publishes it).
  redis.call('PUBLISH', ARGV[7], notice(me, KEYS[1], ver, nil, {}))
end
local out = {grant, tok, free - grant, others2, cap2, deprived2, ver}
for _, x in ipairs(slots) do out[#out + 1] = x end
return out
`)

// renewScript extends each live lease named in ARGV by the TTL, lowers it
// to the slots given with it (a give-back that failed, or whose reply was
// lost, is made good; never raised), and drops each lease that has expired.
// When it freed permits while holders wait, it publishes "f|leases_key" on
// the contention channel as releaseScript does: a give-back sent in the
// same round trip finds them already freed (the renewal may run first, or
// the release be sent again with its script after NOSCRIPT), and the
// holders waiting for them must hear of it now, not at their next round.
// So do the slots of the expired leases of any holder that it reaps (a
// crashed or cut-off holder's): a live holder's renewal is often the
// first script to touch the key after they expired.
// KEYS: l n s b w g q v. ARGV: ttl_ms holder_id limit channel, then id
// slots pairs.
// Returns {other_waiters, cap (-1: nobody else waits), deprived, version,
// alive_1, alive_2, ...} (1 alive, 0 lost).
var renewScript = redis.NewScript(sharesLua + `
local bad = check({'zset', 'hash', 'hash', 'string', 'zset', 'hash', 'hash', 'string'}, {2, 8})
if bad then return redis.error_reply(bad) end
local now, nowus = clock()
local ttl, me, limit = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local ver = version(KEYS[8], nowus, ttl * 2)
-- The slots of the expired leases it reaps (a crashed holder's) count as
-- freed: nothing else tells the holders that wait for them.
local alive, freed = {}, reap(KEYS[1], KEYS[2], KEYS[3], KEYS[4], now)
for i = 5, #ARGV, 2 do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i])
    local _, f = keep_only(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[i], ARGV[i + 1])
    freed = freed + f
    alive[#alive + 1] = 1
  else
    drop_slots(KEYS[3], KEYS[4], ARGV[i])
    redis.call('HDEL', KEYS[2], ARGV[i])
    alive[#alive + 1] = 0
  end
end
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ttl * 2) end
if freed > 0 and redis.call('ZCOUNT', KEYS[5], now, '+inf') > 0 then
  redis.call('PUBLISH', ARGV[4], 'f|' .. KEYS[1])
end
local _, _, others, caps, deprived = shares(KEYS[2], KEYS[5], KEYS[6], KEYS[7], limit, me, now, false, 0)
local cap = -1
if others > 0 then cap = caps[me] or 0 end
local out = {others, cap, deprived, ver}
for _, a in ipairs(alive) do out[#out + 1] = a end
return out
`)

// releaseScript lowers a lease to the slots listed (gives it all back when
// the list is empty), freeing the others. It keeps what the list names
// rather than subtracting, so that a release sent twice (a retry after a
// lost reply, or the next renewal's list) gives back nothing twice, and it
// never raises a lease. It marks the holder served, and when it freed
// permits while holders wait it publishes "f|leases_key" on the contention
// channel, so that they ask again at once.
//
// With a nonce and a seq, it gives back the lease of an acquire whose reply
// the holder never had (lost, or abandoned at the op timeout): the lease,
// if Redis granted it, and the acquire counts as run (see Requests), so
// that, should it reach Redis only now, it leases nothing. The slots it
// frees are the lease's own (s): a lease that expired meanwhile was reaped
// with its slots before any of them could be leased again, and is gone.
// KEYS: l n s b w g r. ARGV: id slots holder_id channel ttl_ms [nonce seq].
// Returns the permits left in the lease, or -1 if it was gone.
var releaseScript = redis.NewScript(sharesLua + `
local bad = check({'zset', 'hash', 'hash', 'string', 'zset', 'hash', 'hash'}, {})
if bad then return redis.error_reply(bad) end
local now = clock()
if ARGV[7] then
  local seq = tonumber(ARGV[7])
  if latest(KEYS[7], ARGV[3], ARGV[6]) < seq then ran(KEYS[7], ARGV[3], ARGV[6], seq, now, tonumber(ARGV[5]) * 2) end
end
if not redis.call('HGET', KEYS[3], ARGV[1]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  return -1
end
local left, freed = keep_only(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[6], ARGV[3], now)
redis.call('PEXPIRE', KEYS[6], tonumber(ARGV[5]) * 2)
if freed > 0 and redis.call('ZCOUNT', KEYS[5], now, '+inf') > 0 then
  redis.call('PUBLISH', ARGV[4], 'f|' .. KEYS[1])
end
return left
`)

// unwaitScript ends a holder's waiting record: no task of it waits for the
// key any more, as of its request seq (the number of its latest acquire of
// the key). If a later acquire of the holder has run, the record is that
// one's and the holder waits again: it ends nothing. Else it counts as run
// (see Requests), so that an acquire it covers that reaches Redis later
// does not record the holder again, and it ends the record unless another
// process of the holder id made it. If others still wait, their caps may
// have risen: it publishes "f|leases_key" so that they ask again (their
// refusals or grants then publish the new caps). If it ended the last
// record, nobody waits any more, and no refusal or grant will say so: it
// publishes a notice of the shares with no contender (see Notices: no one
// is capped), so that the holders of the key keep their permits again,
// rather than hold to the caps of a contention that is over until their
// next renewal.
// KEYS: l w q r v. ARGV: holder_id channel nonce seq ttl_ms. Returns 1 if
// the holder was recorded and the record ended.
var unwaitScript = redis.NewScript(sharesLua + `
local bad = check({false, 'zset', 'hash', 'hash', 'string'}, {5})
if bad then return redis.error_reply(bad) end
local now, nowus = clock()
local me, nonce, seq = ARGV[1], ARGV[3], tonumber(ARGV[4])
if latest(KEYS[4], me, nonce) > seq then return 0 end
ran(KEYS[4], me, nonce, seq, now, tonumber(ARGV[5]) * 2)
if not mine(KEYS[2], KEYS[3], me, nonce, now) then return 0 end
local removed = redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if removed > 0 then
  if redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf') > 0 then
    redis.call('PUBLISH', ARGV[2], 'f|' .. KEYS[1])
  else
    redis.call('PUBLISH', ARGV[2], notice(me, KEYS[1], version(KEYS[5], nowus, tonumber(ARGV[5]) * 2), nil, {}))
  end
end
return removed
`)
