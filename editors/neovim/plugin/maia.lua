-- MAIA for Neovim: user commands. The modules load on first use.
if vim.g.loaded_maia then
  return
end
vim.g.loaded_maia = true

if vim.fn.has('nvim-0.10') ~= 1 then
  vim.api.nvim_echo({ { 'maia.nvim needs Neovim 0.10 or newer', 'ErrorMsg' } }, true, {})
  return
end

local function cmd(name, fn, opts)
  vim.api.nvim_create_user_command(name, fn, opts)
end

local function ask(intent)
  return function(opts)
    local prompt = opts.args ~= '' and opts.args or nil
    require('maia').ask_command(intent, opts, prompt)
  end
end

cmd('MaiaAsk', ask('ask'), { range = true, nargs = '*', desc = 'MAIA: ask about the selection' })
cmd('MaiaExplain', ask('explain'), { range = true, nargs = '*', desc = 'MAIA: explain the selection' })
cmd('MaiaFix', ask('fix'), { range = true, nargs = '*', desc = 'MAIA: fix the selection' })
cmd('MaiaEdit', ask('edit'), { range = true, nargs = '*', desc = 'MAIA: edit the selection' })
cmd('MaiaCancel', function()
  require('maia').cancel()
end, { desc = 'MAIA: cancel the running turn' })
cmd('MaiaNewSession', function()
  require('maia').new_session()
end, { desc = 'MAIA: start a new conversation' })
cmd('MaiaUndo', function()
  require('maia').undo()
end, { desc = 'MAIA: revert the hunks the last answer applied' })
cmd('MaiaAnswer', function()
  require('maia.answer').reopen()
end, { desc = 'MAIA: show the last answer' })
cmd('MaiaAccept', function()
  require('maia.review').accept()
end, { desc = 'MAIA: accept the proposed hunk under the cursor' })
cmd('MaiaReject', function()
  require('maia.review').reject()
end, { desc = 'MAIA: reject the proposed hunk under the cursor' })
cmd('MaiaAcceptAll', function()
  require('maia.review').accept_all()
end, { desc = 'MAIA: accept every remaining proposed hunk' })
cmd('MaiaRejectAll', function()
  require('maia.review').reject_all()
end, { desc = 'MAIA: reject every remaining proposed hunk' })

-- Once a MAIA client runs (or with `autostart`), attach it to the file
-- buffers of its project so that edits to open files are proposed.
vim.api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile' }, {
  group = vim.api.nvim_create_augroup('maia_attach', { clear = true }),
  callback = function(ev)
    if package.loaded['maia'] or vim.g.maia_autostart then
      require('maia').maybe_attach(ev.buf)
    end
  end,
})
