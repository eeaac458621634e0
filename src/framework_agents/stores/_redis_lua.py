"""The Lua scripts of the Redis stores: every multi-key change is one atomic script (internal).

Replies are tables whose first element is a status: ``1`` done, ``-1`` lock lost or held
by another run, ``-2`` stale version, ``-3``/``-4`` key rule broken (ancestor holds a
value / keys stored under it).
"""

from __future__ import annotations

__all__ = [
    "RESEAL_HASH_FIELD",
    "RESEAL_LIST",
    "ACQUIRE",
    "APPEND_LOGGED",
    "FORGET",
    "LIST_THREADS",
    "MEMORY_APPEND",
    "MEMORY_APPEND_IF",
    "MEMORY_CLEAR",
    "MEMORY_MERGE",
    "OUTLIVE",
    "PRUNE_THREADS",
    "PUT",
    "RELEASE",
    "REPAIR_DIGEST",
    "RENEW",
    "SAVE_THREAD",
    "THREAD_GUARD",
    "typed_script",
]


# Every write script starts by checking the Redis types of the keys it writes: a key of
# ours holding another type fails the script with WRONGTYPE before anything is written
# (a script is not rolled back: a command refused half-way leaves what ran before it).
_TYPES = """
local function wrong_types(spec)
  for i = 1, #spec, 2 do
    local t = redis.call('TYPE', spec[i])['ok']
    if t ~= 'none' and t ~= spec[i + 1] then
      return redis.error_reply('WRONGTYPE ' .. spec[i] .. ' holds a ' .. t .. ', not a '
                               .. spec[i + 1] .. '; nothing was written')
    end
  end
  return nil
end
"""


def typed_script(types: str, script: str) -> str:
    """``script`` after a check that ``KEYS[1]``, ``KEYS[2]``... hold the Redis ``types``.

    ``types``: one type name per key, in order; a last ``lists...`` makes every further
    key a list (the per-key logs).
    """
    names = types.split()
    rest = ""
    if names[-1] == "lists...":
        names.pop()
        rest = (
            f"for i = {len(names) + 1}, #KEYS do "
            "spec[#spec + 1] = KEYS[i]; spec[#spec + 1] = 'list' end\n"
        )
    pairs = ", ".join(f"KEYS[{i}], '{name}'" for i, name in enumerate(names, 1))
    return (
        _TYPES
        + f"local spec = {{{pairs}}}\n"
        + rest
        + "local refused = wrong_types(spec)\nif refused then return refused end\n"
        + script
    )


# KEYS: data hash, index zset, times zset, digests hash, last-record hash, the key's log.
# ARGV: key, value, mode ('put'; 'absent': only if missing; 'equal': only if it holds
# ARGV[4]; 'tag': only if its tag is ARGV[4]), expected, value digest, ancestors...
PUT = typed_script(
    "hash zset zset hash hash list",
    """
if ARGV[3] ~= 'put' then
  local stored = redis.call('HGET', KEYS[1], ARGV[1])
  if (ARGV[3] == 'absent' and stored) or (ARGV[3] == 'equal' and stored ~= ARGV[4]) then
    return {-2}
  end
  if ARGV[3] == 'tag' then
    local d = redis.call('HGET', KEYS[4], ARGV[1])
    local last = redis.call('HGET', KEYS[5], ARGV[1])
    if not stored or not d or (last and (d .. ':' .. last) or d) ~= ARGV[4] then
      return {-2}
    end
  end
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  for i = 6, #ARGV do
    if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then return {-3, ARGV[i]} end
  end
  local under = redis.call('ZRANGEBYLEX', KEYS[2], '(' .. ARGV[1] .. '/', '(' .. ARGV[1] .. '0',
                           'LIMIT', 0, 1)
  if #under > 0 then return {-4, under[1]} end
  redis.call('ZADD', KEYS[2], 0, ARGV[1])
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[5])
redis.call('HDEL', KEYS[5], ARGV[1])
redis.call('DEL', KEYS[6])
local t = redis.call('TIME')
redis.call('ZADD', KEYS[3], tonumber(t[1]) + tonumber(t[2]) / 1e6, ARGV[1])
return {1}
""",
)

# A record appended to a value whose tag is still ARGV[3]; replies {1, new tag}.
# KEYS: data hash, times zset, digests hash, last-record hash, the key's log, seq counter.
# ARGV: key, record, expected tag.
APPEND_LOGGED = typed_script(
    "hash zset hash hash list string",
    """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {-2} end
local d = redis.call('HGET', KEYS[3], ARGV[1])
if not d then return {-2} end
local last = redis.call('HGET', KEYS[4], ARGV[1])
if (last and (d .. ':' .. last) or d) ~= ARGV[3] then return {-2} end
local seq = redis.call('INCR', KEYS[6])
redis.call('RPUSH', KEYS[5], ARGV[2])
redis.call('HSET', KEYS[4], ARGV[1], seq)
local t = redis.call('TIME')
redis.call('ZADD', KEYS[2], tonumber(t[1]) + tonumber(t[2]) / 1e6, ARGV[1])
return {1, d .. ':' .. seq}
""",
)

# A value written without its digest (by a release before the value logs): give it its
# digest and drop any log beside it, if it still holds ARGV[2].
# KEYS: data hash, digests hash, last-record hash, the key's log. ARGV: key, value, digest.
REPAIR_DIGEST = typed_script(
    "hash hash hash list",
    """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[4])
return 1
""",
)

# Remove values (with their digests and logs) last written before ARGV[1] ('+inf': any).
# KEYS: data hash, index zset, times zset, digests hash, last-record hash, then one log
# per key. ARGV: cutoff, keys... (the log of ARGV[i] is KEYS[4 + i]). Replies how many went.
FORGET = typed_script(
    "hash zset zset hash hash lists...",
    """
local gone = 0
for i = 2, #ARGV do
  local at = redis.call('ZSCORE', KEYS[3], ARGV[i])
  if at and (ARGV[1] == '+inf' or tonumber(at) < tonumber(ARGV[1])) then
    redis.call('HDEL', KEYS[1], ARGV[i])
    redis.call('ZREM', KEYS[2], ARGV[i])
    redis.call('ZREM', KEYS[3], ARGV[i])
    redis.call('HDEL', KEYS[4], ARGV[i])
    redis.call('HDEL', KEYS[5], ARGV[i])
    redis.call('DEL', KEYS[4 + i])
    gone = gone + 1
  end
end
return gone
""",
)

# The lock check every thread write starts with.
# KEYS[3]: lock, KEYS[4]: fence.  ARGV[2]: our owner token or '', ARGV[3]: our fence.
THREAD_GUARD = """
local owner = redis.call('GET', KEYS[3])
if ARGV[2] ~= '' then
  if owner ~= ARGV[2] then return {-1, 'lost'} end
  if redis.call('GET', KEYS[4]) ~= ARGV[3] then return {-1, 'fenced'} end
elseif owner then
  return {-1, 'held'}
end
"""

# A thread's keys expire (ttl) no sooner than ``ms`` from now (its lock's lease): retention
# never removes a thread that a live run holds. A key without an expiry keeps none.
OUTLIVE = """
local function outlive(key, ms)
  local left = redis.call('PTTL', key)
  if left >= 0 and left < ms then redis.call('PEXPIRE', key, ms) end
end
"""

# KEYS: head hash, message list, lock, fence, threads zset.
# ARGV: thread_id, owner, fence, expected version (-1: any), keep, head, pending, length,
#       ttl ms (0: none), bodies...
SAVE_THREAD = typed_script(
    "hash list string string zset",
    OUTLIVE
    + """
local function save()
"""
    + THREAD_GUARD
    + """
  local v = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
  if ARGV[4] ~= '-1' and tonumber(ARGV[4]) ~= v then return {-2, v} end
  local keep = tonumber(ARGV[5])
  if redis.call('LLEN', KEYS[2]) > keep then
    if keep == 0 then redis.call('DEL', KEYS[2]) else redis.call('LTRIM', KEYS[2], 0, keep - 1) end
  end
  for i = 10, #ARGV, 1000 do
    redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
  redis.call('HSET', KEYS[1], 'version', v + 1, 'length', ARGV[8], 'head', ARGV[6],
             'pending', ARGV[7], 'updated', tostring(now))
  redis.call('ZADD', KEYS[5], now, ARGV[1])
  if ARGV[9] ~= '0' and ARGV[7] == '0' then
    redis.call('PEXPIRE', KEYS[1], ARGV[9])
    redis.call('PEXPIRE', KEYS[2], ARGV[9])
    local held = redis.call('PTTL', KEYS[3])  -- a held thread outlives its lock
    if held > 0 then
      outlive(KEYS[1], held)
      outlive(KEYS[2], held)
    end
  else
    redis.call('PERSIST', KEYS[1])
    redis.call('PERSIST', KEYS[2])
  end
  return {1, v + 1}
end
return save()
""",
)

# KEYS: lock, fence, head hash, message list.  ARGV: owner, lease ms.  Reply: the new
# fence, or 0 when held.
ACQUIRE = typed_script(
    "string string hash list",
    OUTLIVE
    + """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  outlive(KEYS[3], tonumber(ARGV[2]))
  outlive(KEYS[4], tonumber(ARGV[2]))
  return redis.call('INCR', KEYS[2])
end
return 0
""",
)

# KEYS: lock, head hash, message list.  ARGV: owner, lease ms.
RENEW = typed_script(
    "string hash list",
    OUTLIVE
    + """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  outlive(KEYS[2], tonumber(ARGV[2]))
  outlive(KEYS[3], tonumber(ARGV[2]))
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
""",
)

# KEYS: lock.  ARGV: owner.  Compare-and-delete: never releases another run's lock.
RELEASE = typed_script(
    "string",
    """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
""",
)

# KEYS: threads zset.  ARGV: key prefix of heads.  Drops index entries of expired threads.
LIST_THREADS = """
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local out = {}
for _, id in ipairs(ids) do
  if redis.call('EXISTS', ARGV[1] .. id) == 1 then
    out[#out + 1] = id
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
"""

# KEYS: threads zset.  ARGV: head prefix, message prefix, lock prefix, age in seconds.
PRUNE_THREADS = """
local t = redis.call('TIME')
local cutoff = tonumber(t[1]) + tonumber(t[2]) / 1e6 - tonumber(ARGV[4])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. cutoff)
local n = 0
for _, id in ipairs(ids) do
  local pending = redis.call('HGET', ARGV[1] .. id, 'pending')
  if pending ~= '1' and redis.call('EXISTS', ARGV[3] .. id) == 0 then
    if redis.call('DEL', ARGV[1] .. id) == 1 then n = n + 1 end
    redis.call('DEL', ARGV[2] .. id)
    redis.call('ZREM', KEYS[1], id)
  end
end
return n
"""

# A memory is a list (KEYS[1]) of "<shape digit><json>" items, the set (KEYS[2]) of
# their message ids, through which an append skips a message stored already (a retried
# save stores nothing twice), and a counter (KEYS[3], the marker) that every write moves
# forward (an agent appends to the history while it has not moved). A list of an earlier
# release has no set: it is made once.
_MEMORY_IDS = """
local function id_of(item)
  local ok, doc = pcall(cjson.decode, string.sub(item, 2))
  if ok and type(doc) == 'table' and type(doc.id) == 'string' then return doc.id end
  return nil
end
-- Appends items and adds their ids; ids[j] is item j's id when already read (false: it
-- has none), nil when it is still to be read.
local function push(items, ids)
  for i = 1, #items, 1000 do
    redis.call('RPUSH', KEYS[1], unpack(items, i, math.min(i + 999, #items)))
  end
  for j, item in ipairs(items) do
    local id = ids[j]
    if id == nil then id = id_of(item) end
    if id then redis.call('SADD', KEYS[2], id) end
  end
end
-- The items of ARGV[3..] whose message id is neither stored nor given earlier in the
-- call, their ids (false: the item has none) and how many items were left out.
local function new_items()
  local items, ids, given, left_out = {}, {}, {}, 0
  for i = 3, #ARGV do
    local id = id_of(ARGV[i])
    if id and (given[id] or redis.call('SISMEMBER', KEYS[2], id) == 1) then
      left_out = left_out + 1
    else
      items[#items + 1] = ARGV[i]
      ids[#items] = id or false
      if id then given[id] = true end
    end
  end
  return items, ids, left_out
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  for _, item in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
    local id = id_of(item)
    if id then redis.call('SADD', KEYS[2], id) end
  end
end
"""

# The tail of the memory scripts that write: appends ``items`` (``ids``: see push), moves
# the marker, then windows the list: keeps the newest ARGV[1] messages cut between groups
# (memory._window.window_start), and forgets the ids of what it drops. Returns {kept,
# dropped, marker}.
_MEMORY_TAIL = """
push(items, ids)
local marker = redis.call('INCR', KEYS[3])
local limit = tonumber(ARGV[1])
local n = redis.call('LLEN', KEYS[1])
if n <= limit then return {n, 0, marker} end
local tail = redis.call('LRANGE', KEYS[1], -(limit + 1), -1)
local m = #tail
local shapes = {}
for j, item in ipairs(tail) do shapes[j] = string.byte(item, 1) - 48 end
local i = m - limit + 1
while i <= m and shapes[i] == 1 do i = i + 1 end
while i <= m do
  if shapes[i] == 1 then
    i = i + 1
  elseif shapes[i] == 2 then
    i = i + 1
    while i <= m and shapes[i] == 1 do i = i + 1 end
  else
    break
  end
end
local drop = (n - m) + (i - 1)
if drop >= n then
  redis.call('DEL', KEYS[1], KEYS[2])
else
  for _, item in ipairs(redis.call('LRANGE', KEYS[1], 0, drop - 1)) do
    local id = id_of(item)
    if id then redis.call('SREM', KEYS[2], id) end
  end
  redis.call('LTRIM', KEYS[1], drop, -1)
end
return {n - drop, drop, marker}
"""

# KEYS: list, id set, marker.  ARGV: max messages, fresh ('1': replace), items...
# An append skips an item whose message id is stored already or came earlier in it; the
# marker moves when anything changed.
MEMORY_APPEND = typed_script(
    "list set string",
    _MEMORY_IDS
    + """
local items, ids = {}, {}
if ARGV[2] == '1' then
  redis.call('DEL', KEYS[1], KEYS[2])
  for i = 3, #ARGV do items[#items + 1] = ARGV[i] end
else
  items, ids = new_items()
  if #items == 0 then  -- nothing changes (not even the window)
    return {redis.call('LLEN', KEYS[1]), 0, tonumber(redis.call('GET', KEYS[3]) or '0')}
  end
end
"""
    + _MEMORY_TAIL,
)

# KEYS: list, id set, marker.  ARGV: max messages, the marker expected, items...
# Appends every item if the marker is the expected one, the list within the window and
# every item's message id new (none missing, stored already or repeated); else changes
# nothing, returns false.
MEMORY_APPEND_IF = typed_script(
    "list set string",
    _MEMORY_IDS
    + """
if tonumber(redis.call('GET', KEYS[3]) or '0') ~= tonumber(ARGV[2]) then return false end
-- More than this window stored (another instance's wider one): the caller's view (a
-- load's) is not the list.
if redis.call('LLEN', KEYS[1]) > tonumber(ARGV[1]) then return false end
local items, ids, left_out = new_items()
if left_out > 0 then return false end
for j = 1, #items do
  if not ids[j] then return false end
end
"""
    + _MEMORY_TAIL,
)

# KEYS: list, id set, marker. Forgets the history; returns the marker after.
MEMORY_CLEAR = typed_script(
    "list set string",
    """
redis.call('DEL', KEYS[1], KEYS[2])
return redis.call('INCR', KEYS[3])
""",
)

# KEYS: list, id set, marker.  ARGV: max messages, the number of ids that follow, ids (the
# committer's base and the given messages), items... Replaces the list with the items,
# then appends the stored items whose message id is none of the ids: what another writer
# appended meanwhile (stores._codec.appended_by_others; an unreadable item is replaced).
MEMORY_MERGE = typed_script(
    "list set string",
    _MEMORY_IDS
    + """
local seen = {}
local first = 3 + tonumber(ARGV[2])
for i = 3, first - 1 do seen[ARGV[i]] = true end
local items, ids = {}, {}
for i = first, #ARGV do items[#items + 1] = ARGV[i] end
for _, item in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local id = id_of(item)
  if id and not seen[id] then
    items[#items + 1] = item
    ids[#items] = id
  end
end
redis.call('DEL', KEYS[1], KEYS[2])
"""
    + _MEMORY_TAIL,
)


#: ``rotate()``: KEYS[1] a hash; ARGV field, old value, new value. The field is set only
#: if it still holds the old value (a write since wins; the next rotate() sees it).
RESEAL_HASH_FIELD = typed_script(
    "hash",
    """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  return 1
end
return 0
""",
)

#: ``rotate()``: KEYS[1] a list; ARGV (index, old item, new item)...: each item is set
#: only if that index still holds the old item. How many were set.
RESEAL_LIST = typed_script(
    "list",
    """
local n = 0
for i = 1, #ARGV, 3 do
  local at = tonumber(ARGV[i])
  if redis.call('LINDEX', KEYS[1], at) == ARGV[i + 1] then
    redis.call('LSET', KEYS[1], at, ARGV[i + 2])
    n = n + 1
  end
end
return n
""",
)
