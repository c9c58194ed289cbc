-- :checkhealth maia
local M = {}

function M.check()
  local health = vim.health
  local maia = require('maia')
  health.start('maia: Neovim')
  local v = vim.version()
  local version = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.10') == 1 then
    health.ok('Neovim ' .. version)
  else
    health.error('Neovim ' .. version .. ': 0.10 or newer is required')
  end

  health.start('maia: server')
  local cmd = maia.config.cmd or {}
  local exe = cmd[1]
  if exe and vim.fn.executable(exe) == 1 then
    local out = vim.fn.system({ exe, '--version' })
    if vim.v.shell_error == 0 then
      health.ok(('%s: %s'):format(vim.fn.exepath(exe), vim.trim(out)))
    else
      health.warn(('%s --version failed: %s'):format(exe, vim.trim(out)))
    end
    if cmd[2] ~= 'lsp' then
      health.warn('cmd should run `maia lsp`: ' .. table.concat(cmd, ' '))
    end
  else
    health.error(('`%s` is not executable'):format(tostring(exe)), {
      'Install it: cargo install --path server/maia-server',
      "Or point the plugin at it: require('maia').setup({ cmd = { '/path/to/maia', 'lsp' } })",
    })
  end
  local home = vim.env.HOME or ''
  local settings = home .. '/.maia/settings.json'
  if vim.fn.filereadable(settings) == 1 then
    health.ok('settings: ' .. settings)
  elseif vim.env.LITELLM_API_KEY then
    health.ok('no ~/.maia/settings.json; LITELLM_API_KEY is set')
  else
    health.warn('no ~/.maia/settings.json and no LITELLM_API_KEY: MAIA has no model endpoint', {
      'See the README: LiteLLM_URL, model and the API key go in ~/.maia/settings.json',
    })
  end

  health.start('maia: ACP agent (chat plugins)')
  local daemon = maia.config.daemon
  if daemon then
    local name = daemon.token_env or 'MAIA_TOKEN'
    local token = vim.env[name]
    if token and token ~= '' then
      health.ok(('%s (the token in $%s)'):format(table.concat(maia.acp_cmd(), ' '), name))
    else
      health.error(('daemon %s: $%s is not set, so `maia acp --connect` has no token'):format(daemon.url, name), {
        ('Export the token `maia serve token add NAME` printed as %s before starting Neovim'):format(name),
      })
    end
  else
    health.ok(table.concat(maia.acp_cmd(), ' ') .. ' (local; set daemon = { url = ... } for a maia serve daemon)')
  end

  health.start('maia: clients')
  local clients = vim.lsp.get_clients({ name = maia.NAME })
  if #clients == 0 then
    health.info('no MAIA client is running (one starts on the first :MaiaAsk, or set autostart = true)')
  end
  for _, client in ipairs(clients) do
    local caps = client.server_capabilities or {}
    local commands = caps.executeCommandProvider and caps.executeCommandProvider.commands or {}
    health.ok(
      ('client %d, root %s, %d buffer(s), commands: %s'):format(
        client.id,
        tostring(client.config.root_dir),
        vim.tbl_count(client.attached_buffers or {}),
        table.concat(commands, ', ')
      )
    )
  end
  local reviews = vim.tbl_count(require('maia.review').active)
  if reviews > 0 then
    health.info(('%d review(s) of proposed edits pending'):format(reviews))
  end
end

return M
