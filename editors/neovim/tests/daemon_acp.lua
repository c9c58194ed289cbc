-- Headless test of the `daemon` option against a real `maia serve`.
-- Driven by protocol-tests/neovim.rs, which adds a token, starts the
-- daemon (the mock LLM scripted with one streamed answer) and runs:
--   nvim --headless -u NONE -i NONE -n -c "luafile editors/neovim/tests/daemon_acp.lua"
-- with MAIA_BIN, MAIA_PLUGIN, MAIA_DAEMON_URL (ws://…/acp), MAIA_CWD (the
-- session's folder) and the token in MAIA_TEST_DAEMON_TOKEN. The command
-- `require('maia').acp_cmd()` gives is started as a chat plugin would and
-- driven over ACP: initialize, session/new, a prompt answered by the daemon.
-- It exits 0 when every step passed, else prints the failure and exits 1.

local WAIT = 20000

local function log(msg)
  io.stderr:write('[nvim-test] ' .. msg .. '\n')
end

local function check(cond, msg)
  if not cond then
    error('check failed: ' .. msg, 2)
  end
end

local function run()
  vim.opt.rtp:prepend(vim.env.MAIA_PLUGIN)
  local maia = require('maia')

  -- Bad settings are refused at setup, with what to write instead.
  local ok, err = pcall(maia.setup, { daemon = { url = 'http://127.0.0.1:7417/acp' } })
  check(not ok and err:match('daemon.url must be a ws:// or wss:// URL'), 'an http:// URL is refused: ' .. tostring(err))
  ok, err = pcall(maia.setup, { daemon = { url = 'ws://h/acp', token_env = 'maia_0123' .. ' x' } })
  check(not ok and err:match('daemon.token_env must name an environment variable'), 'a token as token_env is refused')

  -- Without `daemon`: the local agent.
  maia.setup({ cmd = { vim.env.MAIA_BIN, 'lsp' } })
  check(vim.deep_equal(maia.acp_cmd(), { vim.env.MAIA_BIN, 'acp' }), 'local: maia acp')

  local url = vim.env.MAIA_DAEMON_URL
  maia.setup({ cmd = { vim.env.MAIA_BIN, 'lsp' }, daemon = { url = url, token_env = 'MAIA_TEST_DAEMON_TOKEN' } })
  local cmd = maia.acp_cmd()
  check(
    vim.deep_equal(cmd, { vim.env.MAIA_BIN, 'acp', '--connect', url, '--token-env', 'MAIA_TEST_DAEMON_TOKEN' }),
    'daemon: ' .. table.concat(cmd, ' ')
  )
  for _, arg in ipairs(cmd) do
    check(not arg:match('maia_%x+'), 'the token is not on the command line')
  end
  log('ok: acp_cmd()')

  -- Drive the command as a chat plugin does: NDJSON over its stdio.
  local answers, text, buffer = {}, {}, ''
  local proc = vim.system(cmd, {
    stdin = true,
    stdout = function(_, data)
      buffer = buffer .. (data or '')
      while true do
        local nl = buffer:find('\n')
        if not nl then
          break
        end
        local line = buffer:sub(1, nl - 1)
        buffer = buffer:sub(nl + 1)
        local msg = vim.json.decode(line)
        if msg.id and (msg.result or msg.error) then
          answers[msg.id] = msg
        elseif msg.method == 'session/update' then
          local u = msg.params.update
          if u.sessionUpdate == 'agent_message_chunk' and u.content.type == 'text' then
            table.insert(text, u.content.text)
          end
        end
      end
    end,
  })
  local function call(id, method, params)
    proc:write(vim.json.encode({ jsonrpc = '2.0', id = id, method = method, params = params }) .. '\n')
    check(vim.wait(WAIT, function()
      return answers[id] ~= nil
    end, 20), 'an answer to ' .. method)
    check(answers[id].result, method .. ' failed: ' .. vim.json.encode(answers[id]))
    log('ok: ' .. method)
    return answers[id].result
  end
  call(1, 'initialize', { protocolVersion = 1, clientCapabilities = vim.empty_dict() })
  local session = call(2, 'session/new', { cwd = vim.env.MAIA_CWD, mcpServers = {} })
  check(type(session.sessionId) == 'string', 'a session id')
  local prompt = call(3, 'session/prompt', {
    sessionId = session.sessionId,
    prompt = { { type = 'text', text = 'Say hello' } },
  })
  check(prompt.stopReason == 'end_turn', 'end_turn: ' .. tostring(prompt.stopReason))
  check(table.concat(text) == 'Hello through the daemon.', 'the streamed answer: ' .. table.concat(text))
  proc:write(nil)
  local done = proc:wait(WAIT)
  check(done.code == 0, 'the bridge exits 0 at EOF: ' .. tostring(done.code))
  log('all steps passed')
end

local ok, err = xpcall(run, debug.traceback)
if not ok then
  io.stderr:write('[nvim-test] FAILED: ' .. tostring(err) .. '\n')
  vim.cmd('cquit 1')
end
vim.cmd('qall!')
