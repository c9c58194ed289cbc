//! OpenAI-compatible Chat Completions client (as served by a LiteLLM proxy) with streaming SSE.
//!
//! [`LlmClient::stream_chat`] sends one streamed request, reports [`Delta`]s as they arrive and
//! returns the assembled [`Completion`]; [`LlmClient::list_models`] reads the model list.
//! Errors are typed ([`LlmError`]) and the API key never appears in `Debug` output or logs.

mod assemble;
mod client;
mod config;
mod error;
mod sse;
mod types;

pub use assemble::Assembler;
pub use client::{LlmClient, MAX_BACKOFF, backoff};
pub use config::{ApiKey, LlmConfig};
pub use error::{LlmError, MAX_RETRY_AFTER};
pub use sse::{SseEvent, events as sse_events};
pub use types::{
    ChatMessage, ChatRequest, Completion, Delta, FinishReason, ModelInfo, ToolCall, ToolSpec, Usage,
};
