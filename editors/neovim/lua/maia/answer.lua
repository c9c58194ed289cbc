-- The answer: `window/showDocument` of `.maia/answers/*.md` opens in a
-- Markdown split (without stealing focus by default), the buffer is
-- attached to the server so it streams into it through
-- `workspace/applyEdit`, and `maia/stream` tracks the turn.
local M = {}

--- Turns by progress token: `{token, session, answer, status, title,
--- text, tool, stop, client_id, source}`.
M.turns = {}
--- The most recent turn.
M.last = nil

local function config()
  return require('maia').config.answer
end

function M.is_answer_uri(uri)
  return type(uri) == 'string' and uri:find('/%.maia/answers/[^/]+%.md$') ~= nil
end

local function turn(token)
  local t = M.turns[token]
  if not t then
    t = { token = token, status = 'running', text = '' }
    M.turns[token] = t
  end
  M.last = t
  return t
end

--- Records the result of `maia.ask` (the turn may have started already).
function M.started(result, client_id, source)
  if type(result) ~= 'table' or not result.token then
    return
  end
  local t = turn(result.token)
  t.session, t.answer, t.client_id, t.source = result.session, result.answer, client_id, source
end

local function answer_window()
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.w[win].maia_answer then
      return win
    end
  end
end

--- Opens `uri` in the answer split; attaches `client_id` so the server
--- appends to the buffer. Returns the buffer.
function M.open(uri, client_id)
  local path = vim.uri_to_fname(uri)
  local buf = vim.fn.bufadd(path)
  vim.fn.bufload(buf)
  vim.bo[buf].buflisted = true
  if vim.bo[buf].filetype == '' then
    vim.bo[buf].filetype = 'markdown'
  end
  local cur = vim.api.nvim_get_current_win()
  local win = answer_window()
  if not win then
    local split = config().split
    if split == 'tab' then
      vim.cmd('tab split')
    elseif split == 'horizontal' then
      vim.cmd('belowright split')
    else
      vim.cmd('botright vsplit')
    end
    win = vim.api.nvim_get_current_win()
    vim.w[win].maia_answer = true
  end
  vim.api.nvim_win_set_buf(win, buf)
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  if client_id then
    vim.lsp.buf_attach_client(buf, client_id)
  end
  if not config().focus and vim.api.nvim_win_is_valid(cur) then
    vim.api.nvim_set_current_win(cur)
  end
  return buf
end

--- `window/showDocument`: answers go to the split, anything else to the
--- default handler.
function M.show_document(err, params, ctx)
  if not params or params.external or not M.is_answer_uri(params.uri) then
    return vim.lsp.handlers['window/showDocument'](err, params, ctx)
  end
  local ok, buf = pcall(M.open, params.uri, ctx.client_id)
  if not ok then
    require('maia').notify('cannot open the answer: ' .. tostring(buf), vim.log.levels.ERROR)
  end
  return { success = ok }
end

--- The answer buffer of turn `t`, when loaded.
function M.buffer(t)
  if not t or not t.answer then
    return nil
  end
  local buf = vim.fn.bufnr(vim.uri_to_fname(t.answer))
  if buf > 0 and vim.api.nvim_buf_is_loaded(buf) then
    return buf
  end
end

-- Keeps the end of the answer in view in windows other than the current.
local function follow(buf)
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if win ~= vim.api.nvim_get_current_win() and vim.api.nvim_win_get_buf(win) == buf then
      vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(buf), 0 })
    end
  end
end

local function finish(t)
  local buf = M.buffer(t)
  if not buf then
    return
  end
  follow(buf)
  if config().save and vim.bo[buf].modified then
    vim.api.nvim_buf_call(buf, function()
      vim.cmd('silent! noautocmd write!')
    end)
  end
end

--- `maia/stream`: `{token, session, answer, kind, ...}`.
function M.on_stream(_, params, ctx)
  if type(params) ~= 'table' or not params.token then
    return
  end
  local t = turn(params.token)
  t.session = params.session or t.session
  t.answer = params.answer or t.answer
  t.client_id = t.client_id or ctx.client_id
  local kind = params.kind
  if kind == 'begin' then
    t.title, t.status = params.title, 'running'
  elseif kind == 'text' then
    t.text = t.text .. (params.text or '')
    local buf = M.buffer(t)
    if buf then
      vim.schedule(function()
        if vim.api.nvim_buf_is_valid(buf) then
          follow(buf)
        end
      end)
    end
  elseif kind == 'tool' then
    t.tool = params.title
  elseif kind == 'toolUpdate' then
    if params.status == 'completed' or params.status == 'failed' then
      t.tool = nil
    end
  elseif kind == 'end' then
    t.status, t.stop, t.tool = 'done', params.stopReason, nil
    vim.schedule(function()
      finish(t)
      if t.stop ~= 'end_turn' then
        require('maia').notify('turn ended: ' .. tostring(t.stop), vim.log.levels.WARN)
      end
    end)
  end
  vim.schedule(function()
    vim.api.nvim_exec_autocmds('User', { pattern = 'MaiaStream', data = params, modeline = false })
  end)
end

--- `:MaiaAnswer`: shows the last answer again.
function M.reopen()
  local t = M.last
  if not t or not t.answer then
    require('maia').notify('no answer yet', vim.log.levels.WARN)
    return
  end
  M.open(t.answer, t.client_id)
end

return M
