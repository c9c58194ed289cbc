//! JSON-RPC batches from a network client (JSON-RPC 2.0 §6, as ACP v2's
//! transports page adopts it), over either transport of `maia serve`.
//!
//! A client that negotiated v2 may send an array of messages (one
//! WebSocket frame, one POST body). Its entries are sorted as on stdio
//! (`maia_rpc::batch::sort`), the batch is opened on the client's outbox
//! before any entry is taken (so an answer given at once is held too), and
//! each valid entry then goes to the hub as a lone message would. The
//! outbox writes the requests' answers as one array on the connection's
//! stream once the last is given; notifications and responses get no
//! entry, so a batch without requests or invalid entries is answered
//! nothing; `[]` is one `-32600`, never an empty array. v1 defines no
//! batches: the transports refuse them there as before.

use serde_json::Value;

use super::hub::Hub;
use super::outbox::Outbox;

/// Takes the batch `entries` of client `conn` (which negotiated v2);
/// `scoped` as for its lone messages (`Hub::receive`).
pub(super) fn take(hub: &Hub, conn: u64, outbox: &Outbox, entries: Vec<Value>, scoped: bool) {
    let mut sorted = match maia_rpc::batch::sort(entries) {
        Ok(sorted) => sorted,
        Err(answer) => {
            outbox.push(None, answer.to_string(), false);
            return;
        }
    };
    outbox.open_batch(&mut sorted);
    for (_, message) in sorted.valid {
        hub.receive(conn, message, scoped);
    }
}
