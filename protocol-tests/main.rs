//! Black-box protocol tests: the real `maia` binary driven over stdio
//! against an in-process scripted mock LLM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

mod acp_ask;
mod acp_auth;
mod acp_background;
mod acp_cancel;
mod acp_compaction;
mod acp_config;
mod acp_context;
mod acp_cost;
mod acp_errors;
mod acp_images;
mod acp_impolite;
mod acp_initialize;
mod acp_llm_faults;
mod acp_lsp_client;
mod acp_mcp;
mod acp_models;
mod acp_modes;
mod acp_order;
mod acp_plan;
mod acp_prompt;
mod acp_queue;
mod acp_sandbox_escape;
mod acp_sessions;
mod acp_steering;
mod acp_subagents;
mod acp_surface;
mod acp_terminal;
mod acp_timeline;
mod acp_tools;
mod acp_workspace;
mod cli_exec;
mod cli_login;
mod fuzz_replay;
mod litellm;
mod lsp;
mod lsp_lifecycle;
mod lsp_undo;
mod neovim;
mod readme;
mod registry;
mod robustness;
mod timeline_files;
