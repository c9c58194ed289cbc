-- MAIA for Neovim: starts `maia lsp` and asks it about selections.
--
-- The server does the work; this plugin adds what a generic LSP client
-- lacks: a free-form question (`vim.ui.input`), the answer in a Markdown
-- split that follows the stream, and a hunk-by-hunk review of proposed
-- edits (see `lua/maia/review.lua`).
local M = {}

M.NAME = 'maia'

--- Default configuration; see `:help maia-config`.
M.defaults = {
  cmd = { 'maia', 'lsp' },
  cmd_env = nil,
  root_markers = { '.maia', '.git', '.hg', '.jj' },
  autostart = false,
  init_timeout = 10000,
  answer = {
    split = 'vertical', -- 'vertical' | 'horizontal' | 'tab'
    focus = false,
    save = true,
  },
  review = {
    keymaps = {
      accept = '<LocalLeader>a',
      reject = '<LocalLeader>r',
      accept_all = '<LocalLeader>A',
      reject_all = '<LocalLeader>R',
      next = ']h',
      prev = '[h',
    },
  },
  capabilities = nil,
  -- A `maia serve` daemon for the ACP chat plugins (`M.acp_cmd()`), e.g.
  -- { url = 'ws://127.0.0.1:7417/acp', token_env = 'MAIA_TOKEN' }.
  daemon = nil,
}

M.config = vim.deepcopy(M.defaults)

--- Checks `daemon`: a ws:// or wss:// URL and the name of an environment
--- variable (the token itself never goes in the configuration).
local function check_daemon(daemon)
  if daemon == nil then
    return
  end
  if type(daemon) ~= 'table' or type(daemon.url) ~= 'string' or not daemon.url:match('^wss?://[^%s/]+') then
    error("MAIA: daemon.url must be a ws:// or wss:// URL, e.g. { url = 'ws://127.0.0.1:7417/acp' }", 0)
  end
  local name = daemon.token_env or 'MAIA_TOKEN'
  if type(name) ~= 'string' or not name:match('^[%a_][%w_]*$') then
    error('MAIA: daemon.token_env must name an environment variable (it holds the token), e.g. MAIA_TOKEN', 0)
  end
end

function M.setup(opts)
  check_daemon((opts or {}).daemon)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  vim.g.maia_autostart = M.config.autostart or nil
  if M.config.autostart then
    for _, buf in ipairs(vim.api.nvim_list_bufs()) do
      M.maybe_attach(buf)
    end
  end
end

--- The ACP agent for chat plugins (CodeCompanion, avante): `maia acp`,
--- or with `daemon` set, `maia acp --connect URL --token-env NAME`: a bridge
--- to that `maia serve`, reading the token from `$NAME` (never from the
--- command line). The binary is `cmd[1]`.
function M.acp_cmd()
  local exe = (M.config.cmd or {})[1] or 'maia'
  local daemon = M.config.daemon
  if daemon then
    return { exe, 'acp', '--connect', daemon.url, '--token-env', daemon.token_env or 'MAIA_TOKEN' }
  end
  return { exe, 'acp' }
end

local has_011 = vim.fn.has('nvim-0.11') == 1

local function notify(msg, level)
  vim.notify('MAIA: ' .. msg, level or vim.log.levels.INFO)
end
M.notify = notify

local function get_clients(filter)
  return vim.lsp.get_clients(filter)
end

--- Sends a request, with the 0.10 (`client.request`) or 0.11
--- (`client:request`) calling convention.
function M.request(client, method, params, handler, bufnr)
  if has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

function M.is_file_buffer(buf)
  return vim.api.nvim_buf_is_valid(buf)
    and vim.bo[buf].buftype == ''
    and vim.api.nvim_buf_get_name(buf) ~= ''
end

--- The nearest directory above `buf`'s file holding any of `root_markers`
--- (all markers weigh the same: `vim.fs.root` with a list prefers the first
--- marker at any height), else the current directory. The home folder's
--- `.maia` holds the user's settings, not a project: it marks no root.
function M.root(buf)
  local name = vim.api.nvim_buf_get_name(buf)
  local dir = vim.fs.normalize(name ~= '' and vim.fs.dirname(name) or vim.fn.getcwd())
  local home = vim.env.HOME and vim.fs.normalize(vim.env.HOME) or nil
  local uv = vim.uv or vim.loop
  while dir do
    for _, marker in ipairs(M.config.root_markers) do
      if not (marker == '.maia' and dir == home) and uv.fs_stat(dir .. '/' .. marker) then
        return dir
      end
    end
    local parent = vim.fs.dirname(dir)
    if parent == nil or parent == dir then
      break
    end
    dir = parent
  end
  return vim.fs.normalize(vim.fn.getcwd())
end

--- The MAIA client serving `buf`'s project, if one runs.
function M.client_for(buf)
  local root = M.root(buf)
  for _, client in ipairs(get_clients({ name = M.NAME })) do
    if client.config.root_dir == root then
      return client
    end
  end
end

local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  caps = vim.tbl_deep_extend('force', caps, {
    window = { workDoneProgress = true, showDocument = { support = true } },
    workspace = {
      applyEdit = true,
      -- The review UI below honours per-hunk annotations.
      workspaceEdit = { documentChanges = true, changeAnnotationSupport = { groupsOnLabel = false } },
    },
  })
  return vim.tbl_deep_extend('force', caps, M.config.capabilities or {})
end

--- Starts (or reuses) the client for `buf`'s project and attaches it;
--- returns the client id.
function M.start(buf)
  local answer = require('maia.answer')
  local review = require('maia.review')
  local id = vim.lsp.start({
    name = M.NAME,
    cmd = M.config.cmd,
    cmd_env = M.config.cmd_env,
    root_dir = M.root(buf),
    capabilities = capabilities(),
    handlers = {
      ['workspace/applyEdit'] = review.handler,
      ['window/showDocument'] = answer.show_document,
      ['maia/stream'] = answer.on_stream,
    },
  }, { bufnr = buf })
  if not id then
    return nil
  end
  -- Attach the project's other open files, so edits to them are proposed.
  local root = M.root(buf)
  for _, other in ipairs(vim.api.nvim_list_bufs()) do
    if other ~= buf and vim.api.nvim_buf_is_loaded(other) and M.is_file_buffer(other) then
      if M.root(other) == root then
        vim.lsp.buf_attach_client(other, id)
      end
    end
  end
  return id
end

--- Attaches a new buffer when its project has a client (or autostart is on).
function M.maybe_attach(buf)
  if not M.is_file_buffer(buf) then
    return
  end
  if M.config.autostart then
    M.start(buf)
    return
  end
  local client = M.client_for(buf)
  if client then
    vim.lsp.buf_attach_client(buf, client.id)
  end
end

--- The initialized client for `buf`, starting it when needed.
function M.ensure(buf)
  local id = M.start(buf)
  if not id then
    notify('could not start ' .. table.concat(M.config.cmd, ' '), vim.log.levels.ERROR)
    return nil
  end
  local ok = vim.wait(M.config.init_timeout, function()
    local c = vim.lsp.get_client_by_id(id)
    return c == nil or c.initialized == true
  end, 20)
  local client = vim.lsp.get_client_by_id(id)
  if not ok or not client then
    notify('the server did not start (see :checkhealth maia and :LspLog)', vim.log.levels.ERROR)
    return nil
  end
  return client
end

--- Byte length of the character starting at byte `col` (1-based) of `line`.
local function char_len(line, col)
  local b = line:byte(col)
  if not b then
    return 0
  end
  if b >= 0xF0 then
    return 4
  elseif b >= 0xE0 then
    return 3
  elseif b >= 0xC0 then
    return 2
  end
  return 1
end

--- The LSP range (UTF-16) of a command's range: the visual selection when
--- the command came from charwise Visual mode, else whole lines (the
--- current line without a range).
function M.command_range(opts, buf)
  buf = buf or vim.api.nvim_get_current_buf()
  local function lines(l1, l2)
    return { start = { line = l1, character = 0 }, ['end'] = { line = l2 + 1, character = 0 } }
  end
  if not opts or (opts.range or 0) == 0 then
    local row = vim.api.nvim_win_get_cursor(0)[1] - 1
    return lines(row, row)
  end
  local l1, l2 = opts.line1 - 1, opts.line2 - 1
  local vs, ve = vim.fn.getpos("'<"), vim.fn.getpos("'>")
  if vim.fn.visualmode() == 'v' and vs[2] == opts.line1 and ve[2] == opts.line2 then
    local last = vim.api.nvim_buf_get_lines(buf, l2, l2 + 1, false)[1] or ''
    local end_byte = math.min(#last, ve[3] - 1 + char_len(last, ve[3]))
    return {
      start = { line = l1, character = vim.lsp.util.character_offset(buf, l1, vs[3] - 1, 'utf-16') },
      ['end'] = { line = l2, character = vim.lsp.util.character_offset(buf, l2, end_byte, 'utf-16') },
    }
  end
  return lines(l1, l2)
end

--- Asks MAIA: `intent` is ask | explain | fix | edit. `opts`: `buf`,
--- `range` (LSP range), `prompt`. Calls `on_started(result)` with the
--- server's `{session, token, answer}`.
function M.ask(intent, opts, on_started)
  opts = opts or {}
  local buf = opts.buf or vim.api.nvim_get_current_buf()
  if not M.is_file_buffer(buf) then
    notify('ask from a file buffer', vim.log.levels.WARN)
    return
  end
  local client = M.ensure(buf)
  if not client then
    return
  end
  local arg = {
    uri = vim.uri_from_bufnr(buf),
    version = vim.lsp.util.buf_versions[buf],
    range = opts.range or M.command_range(nil, buf),
    intent = intent,
    prompt = opts.prompt,
  }
  local params = { command = 'maia.ask', arguments = { arg } }
  M.request(client, 'workspace/executeCommand', params, function(err, result)
    if err then
      notify(err.message or vim.inspect(err), vim.log.levels.ERROR)
      return
    end
    require('maia.answer').started(result, client.id, buf)
    if on_started then
      on_started(result)
    end
  end, buf)
end

--- The `:MaiaAsk`-style commands: a question from the arguments, else
--- from `vim.ui.input` (ask and edit only).
function M.ask_command(intent, cmd_opts, prompt)
  local buf = vim.api.nvim_get_current_buf()
  local range = M.command_range(cmd_opts, buf)
  if prompt or intent == 'explain' or intent == 'fix' then
    M.ask(intent, { buf = buf, range = range, prompt = prompt })
    return
  end
  local label = intent == 'edit' and 'MAIA, change the selection: ' or 'Ask MAIA: '
  vim.ui.input({ prompt = label }, function(input)
    if input == nil then
      return
    end
    M.ask(intent, { buf = buf, range = range, prompt = input ~= '' and input or nil })
  end)
end

local function each_client(buf, command, arg, done)
  local clients = {}
  local c = M.client_for(buf)
  if c then
    clients = { c }
  else
    clients = get_clients({ name = M.NAME })
  end
  if #clients == 0 then
    notify('no MAIA server is running', vim.log.levels.WARN)
    return
  end
  for _, client in ipairs(clients) do
    M.request(client, 'workspace/executeCommand', { command = command, arguments = { arg } }, function(err, result)
      if err then
        notify(err.message or vim.inspect(err), vim.log.levels.ERROR)
      elseif done then
        done(result)
      end
    end, buf)
  end
end

--- Cancels the running turn of the current project (`maia.cancel`).
function M.cancel()
  local buf = vim.api.nvim_get_current_buf()
  local arg = M.is_file_buffer(buf) and { uri = vim.uri_from_bufnr(buf) } or vim.empty_dict()
  each_client(buf, 'maia.cancel', arg, function(result)
    notify(('cancelled %d turn(s)'):format(result and result.cancelled or 0))
  end)
end

--- Starts a new conversation for the current project (`maia.newSession`).
function M.new_session()
  local buf = vim.api.nvim_get_current_buf()
  local arg = M.is_file_buffer(buf) and { uri = vim.uri_from_bufnr(buf) } or vim.empty_dict()
  each_client(buf, 'maia.newSession', arg, function()
    notify('the next question starts a new conversation')
  end)
end

--- Reverts the hunks the last answer applied in the current project
--- (`maia.undo`); hunks changed since are kept and named by the server.
function M.undo()
  local buf = vim.api.nvim_get_current_buf()
  local arg = M.is_file_buffer(buf) and { uri = vim.uri_from_bufnr(buf) } or vim.empty_dict()
  each_client(buf, 'maia.undo', arg, function(result)
    local undone = result and result.undone or 0
    if undone > 0 then
      local conflicts = result.conflicts and #result.conflicts or 0
      local kept = conflicts > 0 and (', kept %d you changed'):format(conflicts) or ''
      notify(('undid %d hunk(s) of the last answer%s'):format(undone, kept))
    end
    M.last_undo = result
  end)
end

--- A short status for statuslines: the running turn's title and progress.
function M.status()
  local turn = require('maia.answer').last
  if not turn or turn.status ~= 'running' then
    return ''
  end
  return (turn.title or 'MAIA') .. (turn.tool and (' · ' .. turn.tool) or '')
end

return M
