-- MAIA as a CodeCompanion ACP adapter. MAIA needs no ACP authentication
-- (its model endpoint and key come from ~/.maia/settings.json or
-- LITELLM_API_KEY), so it extends a preset adapter that has none.
-- For a `maia serve` daemon, call require("maia").setup({ daemon = { url =
-- "ws://…/acp" } }) first and use `default = require("maia").acp_cmd()`.
require("codecompanion").setup({
  adapters = {
    acp = {
      maia = function()
        return require("codecompanion.adapters").extend("opencode", {
          name = "maia",
          formatted_name = "MAIA",
          commands = {
            default = { "maia", "acp" },
          },
        })
      end,
    },
  },
  interactions = {
    chat = { adapter = "maia" },
  },
})
