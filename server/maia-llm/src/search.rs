//! Web search through the proxy: LiteLLM's search API (`GET /v1/search/tools`
//! lists the search tools its config names; `POST /v1/search/<tool>` runs
//! one, request and answer in Perplexity's search shape). The proxy holds
//! the provider's key and bills the search; MAIA only names the tool.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::client::LlmClient;
use crate::error::LlmError;

/// Where LiteLLM lists its search tools.
pub const SEARCH_TOOLS_PATH: &str = "/v1/search/tools";

/// One search's question to the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery {
    pub query: String,
    pub max_results: u32,
    /// Perplexity's `search_domain_filter`: a domain to keep, or `-domain`
    /// to leave out (providers without the filter ignore it).
    pub domain_filter: Vec<String>,
}

/// One result, as the provider gave it (untrusted text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    pub title: String,
    pub url: String,
    pub snippet: String,
    pub date: Option<String>,
}

impl LlmClient {
    /// The names of the proxy's search tools, in its config's order. A
    /// server without the route (HTTP 404 or 405: not LiteLLM, or a
    /// LiteLLM without search) gives an empty list; other failures are
    /// errors. No retries.
    pub async fn search_tools(&self) -> Result<Vec<String>, LlmError> {
        let url = self.config().join(SEARCH_TOOLS_PATH);
        let (status, headers, text) = self.get_text(&url, "the search tools").await?;
        if matches!(status.as_u16(), 404 | 405) {
            tracing::debug!(%url, status = status.as_u16(), "no search tools route");
            return Ok(Vec::new());
        }
        if !status.is_success() {
            return Err(LlmError::from_http(status.as_u16(), &headers, &text));
        }
        let value: Value =
            serde_json::from_str(&text).map_err(|err| LlmError::InvalidResponse {
                message: format!("search tool list is not JSON: {err}"),
            })?;
        Ok(tool_names(&value))
    }

    /// Runs `query` with the proxy's search tool `tool`. No retries; ends
    /// with `Err(Cancelled)` when `cancel` fires.
    pub async fn search(
        &self,
        tool: &str,
        query: &SearchQuery,
        cancel: &CancellationToken,
    ) -> Result<Vec<SearchHit>, LlmError> {
        let url = format!(
            "{}/{}",
            self.config().join("/v1/search"),
            percent_encode(tool)
        );
        let mut body = json!({"query": query.query, "max_results": query.max_results});
        if !query.domain_filter.is_empty() {
            body["search_domain_filter"] = json!(query.domain_filter);
        }
        let (status, headers, text) = self.post_json(&url, &body, "the search", cancel).await?;
        if !status.is_success() {
            return Err(LlmError::from_http(status.as_u16(), &headers, &text));
        }
        let value: Value =
            serde_json::from_str(&text).map_err(|err| LlmError::InvalidResponse {
                message: format!("search answer is not JSON: {err}"),
            })?;
        hits(&value).ok_or_else(|| LlmError::InvalidResponse {
            message: "search answer has no \"results\" array".to_owned(),
        })
    }
}

/// `search_tool_name` of each entry of `{"data": [...]}`.
fn tool_names(value: &Value) -> Vec<String> {
    value["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["search_tool_name"].as_str())
        .filter(|n| !n.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// The results of `{"results": [{title, url, snippet, date}]}`; entries
/// without a URL are skipped.
fn hits(value: &Value) -> Option<Vec<SearchHit>> {
    let text = |v: &Value| v.as_str().map(str::trim).unwrap_or("").to_owned();
    Some(
        value["results"]
            .as_array()?
            .iter()
            .filter_map(|r| {
                let url = text(&r["url"]);
                (!url.is_empty()).then(|| SearchHit {
                    title: text(&r["title"]),
                    url,
                    snippet: text(&r["snippet"]),
                    date: r["date"]
                        .as_str()
                        .filter(|d| !d.trim().is_empty())
                        .map(str::to_owned),
                })
            })
            .collect(),
    )
}

/// A tool name as one URL path segment.
fn percent_encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tool_list_and_the_results_are_read_as_litellm_writes_them() {
        let list = json!({"object": "list", "data": [
            {"search_tool_name": "web", "search_provider": "searxng"},
            {"search_provider": "tavily"},
            {"search_tool_name": "news", "search_provider": "tavily"}
        ]});
        assert_eq!(tool_names(&list), ["web", "news"]);
        assert!(tool_names(&json!({"detail": "Not Found"})).is_empty());
        let answer = json!({"object": "search", "results": [
            {"title": " Tokio ", "url": "https://tokio.rs/", "snippet": "async", "date": "2026-01-02"},
            {"title": "no url", "snippet": "dropped"},
            {"url": "https://docs.rs/", "date": ""}
        ]});
        let found = hits(&answer).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].title, "Tokio");
        assert_eq!(found[0].date.as_deref(), Some("2026-01-02"));
        assert_eq!(found[1].title, "");
        assert_eq!(found[1].date, None);
        assert!(hits(&json!({"error": "x"})).is_none());
        assert_eq!(percent_encode("my search/1"), "my%20search%2F1");
    }
}
