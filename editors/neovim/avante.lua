-- MAIA as an avante.nvim ACP provider: avante starts `maia acp` and shows
-- its chat, tool calls, permission prompts and edits. MAIA's model endpoint
-- and key come from ~/.maia/settings.json (or LITELLM_API_KEY in `env`).
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
