-- wrk script for bench/run: keep-alive clients carrying a mix of session cookies.
--
-- Environment:
--   BENCH_PATH      request path (/small or /big)
--   BENCH_STYLE     tomcat  -> Cookie: JSESSIONID=<32 hex>.<route>       (tether, nginx, bare)
--                   haproxy -> Cookie: JSESSIONID=<route>~<32 hex>.<route> (HAProxy `cookie
--                              JSESSIONID prefix`: the value the client holds after HAProxy
--                              prefixed the server's Set-Cookie)
--   BENCH_ROUTES    space-separated routes (default "n1 n2 n3")
--   BENCH_SESSIONS  number of distinct sessions (default 1000)
--   BENCH_NEW_PCT   share of requests without a cookie, i.e. new sessions (default 10)
--
-- Every request is prebuilt in init(); request() only walks the list, so the Lua cost per
-- request is the same for every proxy.

local path = os.getenv("BENCH_PATH") or "/small"
local style = os.getenv("BENCH_STYLE") or "tomcat"
local sessions = tonumber(os.getenv("BENCH_SESSIONS") or "1000")
local new_pct = tonumber(os.getenv("BENCH_NEW_PCT") or "10")
local routes = {}
for r in string.gmatch(os.getenv("BENCH_ROUTES") or "n1 n2 n3", "%S+") do
  routes[#routes + 1] = r
end

local reqs = {}
local n = 0
local i = 0

function init(args)
  -- Same sessions in every thread and every run: a fixed seed.
  math.randomseed(42)
  local hex = "0123456789ABCDEF"
  local with_cookie = {}
  for s = 1, sessions do
    local id = {}
    for k = 1, 32 do
      local d = math.random(16)
      id[k] = string.sub(hex, d, d)
    end
    id = table.concat(id)
    local route = routes[((s - 1) % #routes) + 1]
    local value
    if style == "haproxy" then
      value = route .. "~" .. id .. "." .. route
    else
      value = id .. "." .. route
    end
    with_cookie[#with_cookie + 1] = wrk.format("GET", path, { ["Cookie"] = "JSESSIONID=" .. value })
  end
  -- new_pct % of all requests carry no cookie.
  local without = math.floor(sessions * new_pct / (100 - new_pct) + 0.5)
  local plain = wrk.format("GET", path, {})
  for s = 1, sessions do reqs[#reqs + 1] = with_cookie[s] end
  for s = 1, without do reqs[#reqs + 1] = plain end
  -- Shuffle so cookie-less requests are spread out; each thread starts elsewhere.
  for k = #reqs, 2, -1 do
    local j = math.random(k)
    reqs[k], reqs[j] = reqs[j], reqs[k]
  end
  n = #reqs
  i = math.random(n) - 1
end

function request()
  i = (i % n) + 1
  return reqs[i]
end
