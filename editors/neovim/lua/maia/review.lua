-- Review of proposed edits. `maia lsp` proposes a change to an open file
-- as one `workspace/applyEdit` request with one (annotated) text edit per
-- hunk. Instead of applying it at once, this handler shows the hunks
-- inline (old lines highlighted as removed, new lines as virtual lines),
-- lets the user accept or reject each, then applies exactly the accepted
-- hunks and answers the request. The server reads the outcome from the
-- document (`didChange`), so the buffer is the truth.
local M = {}

local ns = vim.api.nvim_create_namespace('maia_review')

--- Active reviews by buffer.
M.active = {}

local function notify(msg, level)
  require('maia').notify(msg, level)
end

local function keymaps()
  return require('maia').config.review.keymaps or {}
end

local function split_lines(text)
  local lines = vim.split(text, '\n', { plain = true })
  if lines[#lines] == '' then
    table.remove(lines)
  end
  return lines
end

--- Rows [first, last] the hunk's old text covers; `last < first` for an
--- insertion.
local function rows(hunk)
  local r = hunk.edit.range
  local first = r.start.line
  local last = r['end'].line
  if r['end'].character == 0 and last > first then
    last = last - 1
  elseif r['end'].character == 0 and last == first and r.start.character == 0 then
    last = first - 1
  end
  return first, last
end

local function key_hint()
  local k = keymaps()
  return ('%s accept · %s reject · %s/%s all'):format(
    k.accept or ':MaiaAccept',
    k.reject or ':MaiaReject',
    k.accept_all or ':MaiaAcceptAll',
    k.reject_all or ':MaiaRejectAll'
  )
end

local function render(review)
  local buf = review.buf
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  local count = vim.api.nvim_buf_line_count(buf)
  for _, hunk in ipairs(review.hunks) do
    local first, last = rows(hunk)
    local n = #review.hunks
    local head
    if hunk.state == 'pending' then
      head = { { ('  MAIA %d/%d: %s  [%s]'):format(hunk.index, n, hunk.label or 'proposed change', key_hint()), 'DiagnosticHint' } }
    elseif hunk.state == 'accepted' then
      head = { { ('  MAIA %d/%d: accepted'):format(hunk.index, n), 'DiagnosticOk' } }
    else
      head = { { ('  MAIA %d/%d: rejected'):format(hunk.index, n), 'Comment' } }
    end
    local added = {}
    if hunk.state ~= 'rejected' then
      for _, line in ipairs(split_lines(hunk.edit.newText or '')) do
        added[#added + 1] = { { '+ ' .. line, 'DiffAdd' } }
      end
    end
    if last >= first then
      for row = first, math.min(last, count - 1) do
        vim.api.nvim_buf_set_extmark(buf, ns, row, 0, {
          line_hl_group = hunk.state == 'rejected' and nil or 'DiffDelete',
          sign_text = hunk.state == 'pending' and '-' or nil,
          sign_hl_group = 'DiffDelete',
          virt_text = row == first and head or nil,
          virt_text_pos = 'eol',
          priority = 200,
        })
      end
      if #added > 0 then
        vim.api.nvim_buf_set_extmark(buf, ns, math.min(last, count - 1), 0, { virt_lines = added })
      end
    else
      -- An insertion before row `first` (or after the last line).
      table.insert(added, 1, head)
      if first < count then
        vim.api.nvim_buf_set_extmark(buf, ns, first, 0, { virt_lines = added, virt_lines_above = true })
      else
        vim.api.nvim_buf_set_extmark(buf, ns, count - 1, 0, { virt_lines = added })
      end
    end
  end
end

local function cursor_row()
  return vim.api.nvim_win_get_cursor(0)[1] - 1
end

--- The hunk under the cursor, else the next pending one, else the first
--- pending one.
local function hunk_at(review, row)
  for _, hunk in ipairs(review.hunks) do
    local first, last = rows(hunk)
    if hunk.state == 'pending' and row >= first and row <= math.max(first, last) then
      return hunk
    end
  end
  for _, hunk in ipairs(review.hunks) do
    if hunk.state == 'pending' and rows(hunk) >= row then
      return hunk
    end
  end
  for _, hunk in ipairs(review.hunks) do
    if hunk.state == 'pending' then
      return hunk
    end
  end
end

local function goto_hunk(review, hunk)
  if not hunk then
    return
  end
  for _, win in ipairs(vim.fn.win_findbuf(review.buf)) do
    local row = math.min(hunk.edit.range.start.line, vim.api.nvim_buf_line_count(review.buf) - 1)
    vim.api.nvim_win_set_cursor(win, { row + 1, 0 })
  end
end

local function set_keymaps(review)
  review.saved_maps = {}
  local actions = {
    accept = M.accept,
    reject = M.reject,
    accept_all = M.accept_all,
    reject_all = M.reject_all,
    next = M.next,
    prev = M.prev,
  }
  for name, lhs in pairs(keymaps()) do
    if lhs and actions[name] then
      local old = vim.fn.maparg(lhs, 'n', false, true)
      if old and old.buffer == 1 then
        review.saved_maps[#review.saved_maps + 1] = old
      end
      vim.keymap.set('n', lhs, function()
        actions[name]()
      end, { buffer = review.buf, nowait = true, desc = 'MAIA review: ' .. name })
      review.mapped = review.mapped or {}
      review.mapped[#review.mapped + 1] = lhs
    end
  end
end

local function restore_keymaps(review)
  for _, lhs in ipairs(review.mapped or {}) do
    pcall(vim.keymap.del, 'n', lhs, { buffer = review.buf })
  end
  for _, map in ipairs(review.saved_maps or {}) do
    vim.api.nvim_buf_call(review.buf, function()
      vim.fn.mapset('n', false, map)
    end)
  end
end

--- Ends the review: applies the accepted hunks and answers the server.
local function finish(review)
  if review.done then
    return
  end
  review.done = true
  M.active[review.buf] = nil
  local buf = review.buf
  local valid = vim.api.nvim_buf_is_valid(buf)
  if valid then
    vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
    restore_keymaps(review)
    vim.bo[buf].modifiable = review.modifiable
  end
  pcall(vim.api.nvim_del_augroup_by_id, review.augroup)
  local accepted = {}
  for _, hunk in ipairs(review.hunks) do
    if hunk.state == 'accepted' then
      accepted[#accepted + 1] = hunk.edit
    end
  end
  local result = { applied = false }
  if #accepted > 0 and valid then
    local ok, err = pcall(vim.lsp.util.apply_text_edits, accepted, buf, review.encoding)
    result = ok and { applied = true } or { applied = false, failureReason = tostring(err) }
  elseif #accepted > 0 then
    result = { applied = false, failureReason = 'the buffer was closed during the review' }
  end
  notify(('%d of %d hunk(s) applied'):format(result.applied and #accepted or 0, #review.hunks))
  review.respond(result)
  vim.schedule(function()
    vim.api.nvim_exec_autocmds('User', {
      pattern = 'MaiaReviewDone',
      data = { buf = buf, accepted = #accepted, total = #review.hunks, applied = result.applied },
      modeline = false,
    })
  end)
end

local function decide(review, hunk, state)
  if not hunk then
    return
  end
  hunk.state = state
  local pending = hunk_at(review, cursor_row())
  if not pending then
    finish(review)
    return
  end
  render(review)
  goto_hunk(review, pending)
end

local function current(buf)
  buf = buf or vim.api.nvim_get_current_buf()
  local review = M.active[buf]
  if not review then
    notify('no proposed edit to review in this buffer', vim.log.levels.WARN)
  end
  return review
end

--- Accepts the hunk under the cursor (or hunk number `index`).
function M.accept(index, buf)
  local review = current(buf)
  if review then
    decide(review, index and review.hunks[index] or hunk_at(review, cursor_row()), 'accepted')
  end
end

--- Rejects the hunk under the cursor (or hunk number `index`).
function M.reject(index, buf)
  local review = current(buf)
  if review then
    decide(review, index and review.hunks[index] or hunk_at(review, cursor_row()), 'rejected')
  end
end

local function all(state, buf)
  local review = current(buf)
  if not review then
    return
  end
  for _, hunk in ipairs(review.hunks) do
    if hunk.state == 'pending' then
      hunk.state = state
    end
  end
  finish(review)
end

function M.accept_all(buf)
  all('accepted', buf)
end

function M.reject_all(buf)
  all('rejected', buf)
end

local function move(step)
  local review = current()
  if not review then
    return
  end
  local row = cursor_row()
  local list = {}
  for _, hunk in ipairs(review.hunks) do
    if hunk.state == 'pending' then
      list[#list + 1] = hunk
    end
  end
  if step < 0 then
    list = vim.fn.reverse(list)
  end
  for _, hunk in ipairs(list) do
    local line = hunk.edit.range.start.line
    if (step > 0 and line > row) or (step < 0 and line < row) then
      goto_hunk(review, hunk)
      return
    end
  end
  goto_hunk(review, list[1])
end

function M.next()
  move(1)
end

function M.prev()
  move(-1)
end

--- The review of `buf`, if any (for statuslines and tests).
function M.get(buf)
  return M.active[buf or vim.api.nvim_get_current_buf()]
end

--- Starts reviewing `edits` (text edits, one per hunk) on `buf`;
--- `respond(result)` is called once with the `ApplyWorkspaceEditResult`.
function M.start(buf, edits, annotations, encoding, respond)
  local review = {
    buf = buf,
    encoding = encoding,
    respond = respond,
    hunks = {},
    modifiable = vim.bo[buf].modifiable,
  }
  for i, edit in ipairs(edits) do
    local note = edit.annotationId and annotations[edit.annotationId]
    local label = note and note.label or nil
    if label then
      label = label:gsub('^MAIA: ', '')
    end
    review.hunks[i] = { index = i, edit = edit, state = 'pending', label = label }
  end
  M.active[buf] = review
  -- Show the buffer: in a window that has it, else the current window
  -- (or the previous one when the current shows the answer).
  local win = vim.fn.win_findbuf(buf)[1]
  if not win then
    win = vim.api.nvim_get_current_win()
    if vim.w[win].maia_answer then
      vim.cmd('wincmd p')
      win = vim.api.nvim_get_current_win()
    end
    vim.api.nvim_win_set_buf(win, buf)
  end
  vim.api.nvim_set_current_win(win)
  -- The hunks' positions are those of the current text: no typing meanwhile.
  vim.bo[buf].modifiable = false
  review.augroup = vim.api.nvim_create_augroup('maia_review_' .. buf, { clear = true })
  vim.api.nvim_create_autocmd({ 'BufUnload', 'BufWipeout' }, {
    group = review.augroup,
    buffer = buf,
    callback = function()
      for _, hunk in ipairs(review.hunks) do
        if hunk.state == 'pending' then
          hunk.state = 'rejected'
        end
      end
      finish(review)
    end,
  })
  set_keymaps(review)
  render(review)
  goto_hunk(review, review.hunks[1])
  notify(('%d proposed hunk(s) in %s: %s'):format(
    #review.hunks,
    vim.fn.fnamemodify(vim.api.nvim_buf_get_name(buf), ':~:.'),
    key_hint()
  ))
  vim.schedule(function()
    vim.api.nvim_exec_autocmds('User', { pattern = 'MaiaReview', data = { buf = buf }, modeline = false })
  end)
  return review
end

--- Whether `params` (ApplyWorkspaceEditParams) is a proposal to review:
--- one versioned text document edit labelled as a MAIA edit, or with
--- annotations that need confirmation.
function M.is_proposal(params)
  local edit = params and params.edit
  local changes = edit and edit.documentChanges
  if type(changes) ~= 'table' or #changes ~= 1 then
    return false
  end
  local change = changes[1]
  if change.kind or type(change.edits) ~= 'table' or #change.edits == 0 then
    return false
  end
  if require('maia.answer').is_answer_uri(change.textDocument.uri) then
    return false
  end
  if type(params.label) == 'string' and params.label:find('^MAIA: edit') then
    return true
  end
  for _, note in pairs(edit.changeAnnotations or {}) do
    if note.needsConfirmation then
      return true
    end
  end
  return false
end

--- The `workspace/applyEdit` handler. It runs inside the RPC coroutine of
--- the request, so it can wait for the review to end before answering.
function M.handler(_, params, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  local encoding = client and client.offset_encoding or 'utf-16'
  if not M.is_proposal(params) then
    -- Answer appends and anything else: apply at once, quietly.
    local ok, err = pcall(vim.lsp.util.apply_workspace_edit, params.edit, encoding)
    return { applied = ok, failureReason = (not ok) and tostring(err) or nil }
  end
  local change = params.edit.documentChanges[1]
  local buf = vim.uri_to_bufnr(change.textDocument.uri)
  vim.fn.bufload(buf)
  local version = change.textDocument.version
  if type(version) == 'number' and vim.lsp.util.buf_versions[buf] > version then
    return { applied = false, failureReason = 'the buffer changed after the edit was computed' }
  end
  if M.active[buf] then
    return { applied = false, failureReason = 'another MAIA edit is being reviewed in this buffer' }
  end
  local co, is_main = coroutine.running()
  if not co or is_main then
    local ok, err = pcall(vim.lsp.util.apply_workspace_edit, params.edit, encoding)
    return { applied = ok, failureReason = (not ok) and tostring(err) or nil }
  end
  local annotations = params.edit.changeAnnotations or {}
  M.start(buf, change.edits, annotations, encoding, function(result)
    -- Send the pending `didChange` before the answer.
    local tracking = vim.lsp._changetracking
    if result.applied and client and tracking and tracking.flush then
      pcall(tracking.flush, client, buf)
    end
    vim.schedule(function()
      coroutine.resume(co, result)
    end)
  end)
  return coroutine.yield()
end

return M
