//! OpenAI-compatible Chat Completions client (as served by a LiteLLM proxy) with streaming SSE.
//!
//! [`LlmClient::stream_chat`] sends one streamed request, reports [`Delta`]s as they arrive and
//! returns the assembled [`Completion`]; [`LlmClient::list_models`] reads the model list.
//! [`LlmClient::model_info_windows`] (LiteLLM `/model/info`), [`LlmClient::ask_context_window`]
//! and [`parse_token_count`] help discover a model's context window.
//! [`LlmClient::search_tools`] and [`LlmClient::search`] use the proxy's web search.
//! Errors are typed ([`LlmError`]) and the API key never appears in `Debug` output or logs.

mod assemble;
mod client;
mod config;
mod error;
mod model_info;
mod search;
mod sse;
mod types;

pub use assemble::Assembler;
pub use client::{LlmClient, MAX_BACKOFF, backoff};
pub use config::{ApiKey, LlmConfig, redact_userinfo};
pub use error::{ConnectFailure, LlmError, MAX_RETRY_AFTER};
pub use model_info::{
    ASK_CONTEXT_WINDOW_TIMEOUT, CONTEXT_WINDOW_QUESTION, MAX_TOKEN_COUNT, MIN_TOKEN_COUNT,
    MODEL_INFO_PATH, ModelInfoEntry, Prices, parse_token_count, plausible_window,
};
pub use search::{SEARCH_TOOLS_PATH, SearchHit, SearchQuery};
pub use sse::{SseEvent, events as sse_events};
pub use types::{
    ChatMessage, ChatRequest, Completion, Delta, FinishReason, Image, ModelInfo, ToolCall,
    ToolSpec, Usage,
};
