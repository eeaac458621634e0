"""The Lua scripts of the Redis memory-bank backend: one atomic script per operation (internal).

Every script takes the bank's key prefix (``<store prefix>bank:``) as ``ARGV[1]`` and
builds the record and key-timeline keys from it; ``KEYS`` are the fixed keys it writes
(checked for their Redis type first). A write script checks everything it will rely on
before its first write, then appends its change-log entries, then writes the records: a
script is not rolled back, so nothing may fail half-way.

Write replies are tables whose first element is a status: ``1`` done, ``0`` nothing to do
(the job is not pending, the record is unknown), ``-2`` what the caller read has changed
(read again), ``-3`` stored data of the wrong shape (the second element says which).

The key timeline rule (:func:`framework_agents.bank._records.place_on_timeline`) is applied
in Python, never here: ``INSERT`` receives its result with what it was computed from, and
refuses (``-2``) when that is no longer what is stored.
"""

from __future__ import annotations

from ._redis_lua import typed_script

__all__ = ["ADD_JOB", "CHANGES", "DELETE", "INSERT", "LATEST", "REVISE", "SIBLINGS"]

# The latest revision of a record: {n, to, json[, vector]}, or 0 when it is not stored.
# A field that is missing reads as '-' (never a valid value): the caller reports it.
# (A record never lacks n: the key exists only while its hash holds fields.)
_LATEST = """
local function latest(rec)
  local head = redis.call('HMGET', rec, 'n', 'to')
  if not head[1] then
    if redis.call('EXISTS', rec) == 0 then return 0 end
    return {'-', head[2] or '-', '-'}
  end
  local body = redis.call('HMGET', rec, 'j' .. head[1], 'v' .. head[1])
  local out = {head[1], head[2] or '-', body[1] or '-'}
  if body[2] then out[4] = body[2] end
  return out
end
"""

# One change-log entry for the record ARGV id: INCR the counter (KEYS[1]) and add
# '<seq>-0' to the stream (KEYS[2]). The error text when the counter or the stream is
# broken (only the first entry of a script can meet that: then nothing else was written).
_APPEND = """
local function append(id)
  local seq = redis.pcall('INCR', KEYS[1])
  if type(seq) == 'table' then return 'the change-log counter: ' .. tostring(seq.err) end
  local added = redis.pcall('XADD', KEYS[2], seq .. '-0', 'r', id)
  if type(added) == 'table' and added.err then
    return 'the change log: ' .. tostring(added.err)
  end
  return nil
end
"""

# KEYS: the change log. ARGV: first entry id, most entries. Replies the entries as one
# string, "<entry id> <record id>\n" each (one reply to parse, not three per entry), or
# {-3, why} for an entry of another shape.
CHANGES = """
local lines = {}
for _, entry in ipairs(redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2])) do
  local fields = entry[2]
  if #fields ~= 2 or fields[1] ~= 'r' or string.find(fields[2], '\\n', 1, true) then
    return {-3, 'change-log entry ' .. entry[1] .. ' has the wrong shape'}
  end
  lines[#lines + 1] = entry[1] .. ' ' .. fields[2] .. '\\n'
end
return table.concat(lines)
"""

# KEYS: (declared for the error text) the change log. ARGV: bank prefix, record ids...
# Replies one string: per id, "x\n" when it is not stored, else the header
# "<n> <to> <JSON length> <vector length or -1>\n" then the JSON and the vector (one reply
# to parse, not four per record).
LATEST = (
    _LATEST
    + """
local out = {}
for i = 2, #ARGV do
  local row = latest(ARGV[1] .. 'rec:' .. ARGV[i])
  if row == 0 then
    out[#out + 1] = 'x\\n'
  else
    local vector = row[4] or ''
    local size = row[4] and #vector or -1
    out[#out + 1] = row[1] .. ' ' .. row[2] .. ' ' .. #row[3] .. ' ' .. size .. '\\n'
    out[#out + 1] = row[3]
    out[#out + 1] = vector
  end
end
return table.concat(out)
"""
)

# A key timeline is a sorted set of members '<valid_from + 2^63, 20 digits>:<id>' (all
# scored 0), so its lexical order is the timeline's order, (valid_from, id).
_NEIGHBOURS = """
local function neighbours(set, member)
  local before = redis.call('ZREVRANGEBYLEX', set, '(' .. member, '-', 'LIMIT', 0, 1)[1]
  local after = redis.call('ZRANGEBYLEX', set, '(' .. member, '+', 'LIMIT', 0, 1)[1]
  return before or '', after or ''
end
local function id_of(member) return string.sub(member, 22) end
"""

# What a keyed insert is computed from: the records either side of each new row on its
# key's timeline. KEYS: (declared) the change log.
# ARGV: bank prefix, number of rows, 2 per row: key digest, timeline member; record ids...
# Replies {per row: {member before ('' none), its latest() fields (n, to, json), member
# after, its n, to, json}}, then {1 or 0 per record id: whether it is stored}.
SIBLINGS = (
    _LATEST
    + _NEIGHBOURS
    + """
local P, n = ARGV[1], tonumber(ARGV[2])
local out = {}
for at = 3, 2 * n + 1, 2 do
  local entry = {}
  for _, member in ipairs({neighbours(P .. 'key:' .. ARGV[at], ARGV[at + 1])}) do
    local row = {'', '', ''}
    if member ~= '' then row = latest(P .. 'rec:' .. id_of(member)) end
    if row == 0 then row = {'', '', ''} end
    entry[#entry + 1] = member
    for f = 1, 3 do entry[#entry + 1] = row[f] end
  end
  out[#out + 1] = entry
end
local stored = {}
for i = 2 * n + 3, #ARGV do stored[#stored + 1] = redis.call('EXISTS', P .. 'rec:' .. ARGV[i]) end
out[#out + 1] = stored
return out
"""
)

# KEYS: change-log counter, change log, jobs hash.
# ARGV: bank prefix, job id ('' none), number of rows, number of closings, number of
# checks; then 8 per row: id, mode ('a' any, 'n' must be new, 'e' must be stored), key
# digest ('' none), timeline member, revision-1 JSON, valid_to ('' none), '1'/'0' has a
# vector, vector; then 2 per closing: id, valid_to; then 5 per check: key digest, a new
# row's member, the member expected before it ('' none) and that record's valid_to, the
# member expected after it ('' none).
# Replies {1, per row: 0 written, or latest() of the stored record}.
INSERT = typed_script(
    "string stream hash",
    _LATEST
    + _APPEND
    + _NEIGHBOURS
    + """
local P, job = ARGV[1], ARGV[2]
local nrows, nclose, nchecks = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local first_close = 6 + 8 * nrows
local first_check = first_close + 2 * nclose
if job ~= '' and redis.call('HEXISTS', KEYS[3], job) == 0 then return {0} end
local types = {}
for r = 0, nrows - 1 do
  local at = 6 + 8 * r
  types[#types + 1] = P .. 'rec:' .. ARGV[at]; types[#types + 1] = 'hash'
  if ARGV[at + 2] ~= '' then
    types[#types + 1] = P .. 'key:' .. ARGV[at + 2]; types[#types + 1] = 'zset'
  end
end
for c = first_close, first_check - 1, 2 do
  types[#types + 1] = P .. 'rec:' .. ARGV[c]; types[#types + 1] = 'hash'
end
refused = wrong_types(types)
if refused then return refused end
for at = first_check, first_check + 5 * (nchecks - 1), 5 do
  local before, after = neighbours(P .. 'key:' .. ARGV[at], ARGV[at + 1])
  if before ~= ARGV[at + 2] or after ~= ARGV[at + 4] then return {-2} end
  if before ~= '' and
     (redis.call('HGET', P .. 'rec:' .. id_of(before), 'to') or '-') ~= ARGV[at + 3] then
    return {-2}
  end
end
local fresh, seen = {}, {}
for r = 0, nrows - 1 do
  local at = 6 + 8 * r
  local id, mode = ARGV[at], ARGV[at + 1]
  local rec = P .. 'rec:' .. id
  if redis.call('EXISTS', rec) == 1 then
    if mode == 'n' then return {-2} end
    local row = latest(rec)
    if row == 0 or row[1] == '-' or row[3] == '-' then
      return {-3, 'record ' .. id .. ' has no latest revision'}
    end
  elseif not seen[id] then
    if mode == 'e' then return {-2} end
    fresh[r] = true
  end
  seen[id] = true
end
for r = 0, nrows - 1 do
  if fresh[r] then
    local broken = append(ARGV[6 + 8 * r])
    if broken then return {-3, broken} end
  end
end
for c = first_close, first_check - 1, 2 do
  local broken = append(ARGV[c])
  if broken then return {-3, broken} end
end
for r = 0, nrows - 1 do
  if fresh[r] then
    local at = 6 + 8 * r
    local rec = P .. 'rec:' .. ARGV[at]
    redis.call('HSET', rec, 'n', '1', 'to', ARGV[at + 5], 'k', ARGV[at + 2], 'm', ARGV[at + 3],
               'j1', ARGV[at + 4])
    if ARGV[at + 6] == '1' then redis.call('HSET', rec, 'v1', ARGV[at + 7]) end
    if ARGV[at + 2] ~= '' then
      redis.call('ZADD', P .. 'key:' .. ARGV[at + 2], 0, ARGV[at + 3])
    end
  end
end
for c = first_close, first_check - 1, 2 do
  redis.call('HSET', P .. 'rec:' .. ARGV[c], 'to', ARGV[c + 1])
end
if job ~= '' then redis.call('HDEL', KEYS[3], job) end
local out = {1}
for r = 0, nrows - 1 do
  if fresh[r] then out[#out + 1] = 0 else out[#out + 1] = latest(P .. 'rec:' .. ARGV[6 + 8 * r]) end
end
return out
""",
)

# KEYS: change-log counter, change log. ARGV: bank prefix, record id, the revision the
# caller read, the new revision's JSON, '1'/'0' has a vector, vector.
REVISE = typed_script(
    "string stream",
    _APPEND
    + """
local rec = ARGV[1] .. 'rec:' .. ARGV[2]
refused = wrong_types({rec, 'hash'})
if refused then return refused end
local n = redis.call('HGET', rec, 'n')
if not n then return {0} end
if n ~= ARGV[3] then return {-2} end
local broken = append(ARGV[2])
if broken then return {-3, broken} end
local next = tostring(tonumber(n) + 1)
redis.call('HSET', rec, 'n', next, 'j' .. next, ARGV[4])
if ARGV[5] == '1' then redis.call('HSET', rec, 'v' .. next, ARGV[6]) end
return {1}
""",
)

# KEYS: change-log counter, change log. ARGV: bank prefix, record ids (distinct)...
# Removes each stored record's hash (every revision and vector) and its member from its
# key's timeline; replies {1, how many were stored}.
DELETE = typed_script(
    "string stream",
    _APPEND
    + """
local P = ARGV[1]
local types, found = {}, {}
for i = 2, #ARGV do
  types[#types + 1] = P .. 'rec:' .. ARGV[i]; types[#types + 1] = 'hash'
end
refused = wrong_types(types)
if refused then return refused end
for i = 2, #ARGV do
  local rec = P .. 'rec:' .. ARGV[i]
  if redis.call('EXISTS', rec) == 1 then
    local key = redis.call('HMGET', rec, 'k', 'm')
    found[#found + 1] = {ARGV[i], rec, key[1] or '', key[2] or ''}
    if found[#found][3] ~= '' then
      types[#types + 1] = P .. 'key:' .. key[1]; types[#types + 1] = 'zset'
    end
  end
end
refused = wrong_types(types)
if refused then return refused end
for _, f in ipairs(found) do
  local broken = append(f[1])
  if broken then return {-3, broken} end
end
for _, f in ipairs(found) do
  redis.call('DEL', f[2])
  if f[3] ~= '' then redis.call('ZREM', P .. 'key:' .. f[3], f[4]) end
end
return {1, #found}
""",
)

# KEYS: jobs hash, jobs counter. ARGV: job id, job body. Stores '<order>\\n<body>' unless
# the job is stored; replies {1} (or {-3, why} when the counter is not a number).
ADD_JOB = typed_script(
    "hash string",
    """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return {1} end
local order = redis.pcall('INCR', KEYS[2])
if type(order) == 'table' then return {-3, 'the jobs counter: ' .. tostring(order.err)} end
redis.call('HSET', KEYS[1], ARGV[1], order .. '\\n' .. ARGV[2])
return {1}
""",
)
