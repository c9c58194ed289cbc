-- Headless end-to-end test of the plugin against the real `maia lsp`.
-- Driven by protocol-tests/neovim.rs, which starts the mock LLM with two
-- scripted turns (a text answer; a Read, an Edit of two hunks and "Done.")
-- (after the review, :MaiaUndo reverts the accepted hunk) and runs:
--   nvim --headless -u NONE -i NONE -n -c "luafile editors/neovim/tests/ask_review.lua"
-- in the project directory, with MAIA_BIN (the `maia` binary),
-- MAIA_PLUGIN (editors/neovim) and MAIA_FILE (the file to open) set.
-- It exits 0 when every step passed, else prints the failure on stderr
-- and exits 1.

local WAIT = 20000

local function log(msg)
  io.stderr:write('[nvim-test] ' .. msg .. '\n')
end

local function wait_for(what, cond)
  if not vim.wait(WAIT, cond, 20) then
    error('timed out waiting for ' .. what, 2)
  end
  log('ok: ' .. what)
end

local function check(cond, msg)
  if not cond then
    error('check failed: ' .. msg, 2)
  end
end

local function lines(buf)
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end

local function run()
  vim.o.swapfile = false
  vim.opt.rtp:prepend(vim.env.MAIA_PLUGIN)
  vim.cmd('runtime! plugin/maia.lua')
  check(vim.fn.exists(':MaiaAsk') == 2, ':MaiaAsk is defined')
  local maia = require('maia')
  maia.setup({ cmd = { vim.env.MAIA_BIN, 'lsp' }, answer = { focus = false } })
  -- The help file parses.
  -- The help file parses (tags generated in a scratch copy).
  local docdir = vim.fn.tempname()
  vim.fn.mkdir(docdir, 'p')
  vim.fn.writefile(vim.fn.readfile(vim.env.MAIA_PLUGIN .. '/doc/maia.txt'), docdir .. '/maia.txt')
  vim.cmd('helptags ' .. vim.fn.fnameescape(docdir))
  local tags = table.concat(vim.fn.readfile(docdir .. '/tags'), '\n')
  for _, tag in ipairs({ ':MaiaAsk', ':MaiaUndo', 'maia-review', 'maia-acp', 'maia.setup()' }) do
    check(tags:find(tag, 1, true) ~= nil, 'help tag ' .. tag)
  end
  -- :checkhealth maia runs.
  vim.cmd('checkhealth maia')
  local health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  check(health:find('maia: server', 1, true) ~= nil, 'checkhealth output: ' .. health)
  check(health:find('ERROR', 1, true) == nil, 'checkhealth has no error: ' .. health)
  vim.cmd('bwipeout!')

  vim.cmd.edit(vim.fn.fnameescape(vim.env.MAIA_FILE))
  local src = vim.api.nvim_get_current_buf()
  local src_win = vim.api.nvim_get_current_win()

  -- 1. Explain a visual selection: the answer fills a Markdown split.
  vim.cmd('normal! 2GVj' .. vim.keycode('<Esc>'))
  vim.cmd("'<,'>MaiaExplain")
  local answer = require('maia.answer')
  wait_for('the first turn to end', function()
    return answer.last ~= nil and answer.last.status == 'done'
  end)
  local first = answer.last
  check(first.stop == 'end_turn', 'first turn ended normally: ' .. tostring(first.stop))
  local abuf = answer.buffer(first)
  check(abuf ~= nil, 'the answer buffer is loaded')
  wait_for('the answer buffer to hold the answer', function()
    return table.concat(lines(abuf), '\n'):find('adds %*%*two%*%* numbers%.') ~= nil
  end)
  check(lines(abuf)[1] == '# MAIA: Explain', 'answer header: ' .. tostring(lines(abuf)[1]))
  check(vim.bo[abuf].filetype == 'markdown', 'answer is markdown')
  check(#vim.fn.win_findbuf(abuf) == 1, 'the answer is shown in a split')
  check(vim.api.nvim_get_current_win() == src_win, 'focus stays in the source window')
  wait_for('the answer to be saved', function()
    return not vim.bo[abuf].modified
  end)
  check(
    vim.lsp.get_clients({ bufnr = abuf, name = 'maia' })[1] ~= nil,
    'the answer buffer is attached to the server'
  )

  -- 2. Ask for an edit: the proposal opens a review with two hunks.
  vim.cmd('normal! 2GV2j' .. vim.keycode('<Esc>'))
  vim.cmd("'<,'>MaiaAsk uppercase two and four")
  wait_for('the review to start', function()
    return require('maia.review').get(src) ~= nil
  end)
  local review = require('maia.review').get(src)
  check(#review.hunks == 2, 'two hunks, got ' .. #review.hunks)
  check(not vim.bo[src].modifiable, 'the buffer is locked during the review')
  local marks = vim.api.nvim_buf_get_extmarks(src, vim.api.nvim_get_namespaces().maia_review, 0, -1, { details = true })
  local virt = 0
  for _, m in ipairs(marks) do
    if m[4].virt_lines then
      virt = virt + 1
    end
  end
  check(virt == 2, 'one block of added lines per hunk, got ' .. virt)
  check(vim.api.nvim_get_current_buf() == src, 'the reviewed buffer is current')
  -- The buffer is unchanged until the review ends.
  check(table.concat(lines(src), '\n') == 'one\ntwo\nthree\nfour\nfive', 'unchanged during review')

  -- Accept hunk 1 with the command, reject hunk 2 with the keymap.
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  vim.cmd('MaiaAccept')
  check(review.hunks[1].state == 'accepted', 'hunk 1 accepted')
  check(vim.api.nvim_win_get_cursor(0)[1] == 4, 'the cursor moved to hunk 2')
  vim.cmd('normal \\r')
  check(review.hunks[2].state == 'rejected', 'hunk 2 rejected')
  check(require('maia.review').get(src) == nil, 'the review ended')
  check(vim.bo[src].modifiable, 'the buffer is modifiable again')
  check(vim.fn.maparg('\\r', 'n') == '', 'review keymaps removed')

  wait_for('the second turn to end', function()
    return answer.last ~= first and answer.last.status == 'done'
  end)
  check(answer.last.stop == 'end_turn', 'second turn ended normally')
  check(table.concat(lines(src), '\n') == 'one\nTWO\nthree\nfour\nfive', 'buffer: ' .. table.concat(lines(src), '|'))

  vim.api.nvim_set_current_buf(src)
  vim.cmd('write')
  -- No deprecation warnings or errors from the plugin on the way.
  local messages = vim.api.nvim_exec2('messages', { output = true }).output
  check(not messages:find('deprecated') and not messages:find('Error'), 'messages: ' .. messages)

  -- 3. :MaiaUndo reverts the hunk the answer applied.
  local written = table.concat(vim.fn.readfile(vim.env.MAIA_FILE), '\n')
  check(written == 'one\nTWO\nthree\nfour\nfive', 'the file holds the accepted hunk: ' .. written)
  vim.cmd('MaiaUndo')
  wait_for('the undo to answer', function()
    return maia.last_undo ~= nil
  end)
  check(maia.last_undo.undone == 1, 'one hunk undone: ' .. vim.inspect(maia.last_undo))
  check(table.concat(lines(src), '\n') == 'one\ntwo\nthree\nfour\nfive', 'undone: ' .. table.concat(lines(src), '|'))
  vim.cmd('write')
  messages = vim.api.nvim_exec2('messages', { output = true }).output
  check(messages:find('undid 1 hunk', 1, true) ~= nil, 'the undo is reported: ' .. messages)
  log('messages:\n' .. messages)
  log('all steps passed')
end

local ok, err = xpcall(run, debug.traceback)
if not ok then
  log('FAILED: ' .. tostring(err))
  local msgs = vim.api.nvim_exec2('messages', { output = true }).output
  log('messages:\n' .. msgs)
  vim.cmd('cquit 1')
else
  vim.cmd('qall!')
end
