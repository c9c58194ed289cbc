//! Newline-delimited JSON-RPC 2.0 over a byte stream.
//!
//! This crate knows JSON-RPC and nothing of ACP or of the engine: it frames
//! lines ([`framing`]), classifies messages ([`message`]), correlates the
//! responses to requests it sends ([`connection`]) and writes every outgoing
//! message through one writer task so that their order is the order in which
//! they were queued. JSON-RPC batches are taken once a connection allows
//! them ([`Connection::allow_batches`]).

pub mod batch;
pub mod connection;
pub mod framing;
pub mod inbox;
pub mod message;
pub mod tasks;

pub use connection::{
    CANCEL_REQUEST, Connection, Incoming, PendingRequest, RequestError, cancelled,
};
pub use inbox::Inbox;
pub use message::{ErrorCode, Id, RpcError};
pub use tasks::{serve, serve_blocking_writer};
