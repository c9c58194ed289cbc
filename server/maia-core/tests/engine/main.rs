//! In-process engine tests: an [`maia_core::Engine`] against the scripted
//! mock LLM, driven through `SessionHandle` and its events (no subprocess,
//! no protocol). Protocol tests stay for the wire.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod commands;
mod effects;
mod files_prop;
mod harness;
mod journal_state;
mod state;
mod subagents;
mod turns;
