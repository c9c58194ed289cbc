-- MAIA as an avante.nvim ACP provider: avante starts `maia acp` and shows
-- its chat, tool calls, permission prompts and edits. MAIA's model endpoint
-- and key come from ~/.maia/settings.json (or LITELLM_API_KEY in `env`).
-- For a `maia serve` daemon: require("maia").setup({ daemon = { url =
-- "ws://…/acp" } }), then command = acp[1], args = vim.list_slice(acp, 2)
-- with acp = require("maia").acp_cmd() (the token in $MAIA_TOKEN).
require("avante").setup({
  provider = "maia",
  acp_providers = {
    maia = {
      command = "maia",
      args = { "acp" },
      env = {
        -- LITELLM_API_KEY = os.getenv("LITELLM_API_KEY"),
      },
    },
  },
})
