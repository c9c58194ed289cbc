//! The MAIA engine: sessions, the turn loop, tool execution and the
//! permission broker.
//!
//! The engine knows nothing of ACP, LSP or JSON-RPC. A front door starts a
//! session with [`Engine::start_session`], sends it operations through the
//! returned [`SessionHandle`] and turns the [`Event`]s it receives into its
//! own protocol. Requests that need an answer from the user (permission)
//! are events carrying a reply channel, so they stay ordered with the
//! updates around them.

mod background;
mod blocking;
pub mod budget;
pub mod catalogue;
pub mod checkpoint;
pub mod client;
pub mod commands;
mod compaction;
pub mod context_file;
pub mod context_map;
mod conversation;
pub mod cost;
pub mod custom_tools;
pub mod effect;
mod engine;
mod event;
pub mod export;
pub mod fault;
mod handle;
pub mod hooks;
pub mod images;
mod langs;
pub mod markdown_commands;
mod mcp;
pub mod mcp_trust;
mod md_files;
mod meter;
pub mod mode;
mod options;
mod oversize;
pub mod permission;
pub mod plan_mode;
pub mod policy;
mod project;
pub mod prompt;
pub mod prompt_syntax;
pub mod queue;
pub mod review;
mod session;
mod session_state;
pub mod session_tools;
pub mod settings;
pub mod skills;
mod slash;
pub mod store;
pub mod subagent;
mod system_prompt;
pub mod telemetry;
mod text_edits;
mod text_tool_calls;
pub mod timeline;
pub mod title;
mod tools;
pub mod undone;
pub mod web_search;
pub mod window;
pub mod workspace;
pub mod worktree;

pub use client::{Answer, Asker, ClientTools, Question};
pub use engine::{Engine, EngineOptions, LoadError, McpServerConfig, McpTransport, SessionSummary};
pub use event::{
    ChoiceKind, CommandEntry, CommandProgress, CompactionState, Event, FileChange, FileOperation,
    HookReport, NoticeLevel, PermissionChoice, PermissionReply, PermissionRequest, StopReason,
    SubagentEvent, SubagentInfo, SubagentState, SubagentUpdate, ToolCallPatch, ToolCallView,
    ToolContent, ToolStatus, Unfinished,
};
pub use handle::{Busy, SessionHandle};
/// The language servers a session would use ([`maia_lsp_client`]).
pub use langs::settings as language_servers;
pub use mode::Mode;
pub use options::REASONING_EFFORT;
pub use prompt::PromptPart;
pub use session::steer::SteerOutcome;
pub use session::text::display_text;
pub use session_state::{SessionState, StateReader, TurnId};
pub use tools::reserved_tool_names;
