-- wrk script: POST the JSON body read from the file named by the first script argument
-- (`wrk ... URL -- BODY_FILE`). Headers (Authorization) come from wrk's -H options.
-- Non-2xx answers are counted by wrk itself ("Non-2xx or 3xx responses"); no response()
-- hook, so wrk spends no Lua time per response on a 2-core machine it shares with the server.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

function init(args)
  local file = assert(io.open(args[1], "rb"))
  wrk.body = file:read("*a")
  file:close()
end
