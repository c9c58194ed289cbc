//! MCP tools on demand and MCP servers' instructions (docs/tools.md, "MCP
//! tools on demand"): a server whose tool definitions weigh more than the
//! `mcpToolSearch` share of the window is offered by name in `ToolSearch`'s
//! description; a search or a call loads a tool for the rest of the thread
//! (a reload and a compaction keep it, `/clear` forgets it); the setting
//! forces either way; a server's `instructions` reach the system prompt
//! under its name, capped, only for the servers the user vouches for.
//!
//! The server is `maia-mock-mcp` with `MOCK_MCP_EXTRA_TOOLS` (tools of a
//! real server's weight) and `MOCK_MCP_INSTRUCTIONS`; the reference
//! `@modelcontextprotocol/server-everything` measures what a request saves.

use std::time::{Duration, Instant};

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::acp_mcp::mock_mcp;
use crate::harness::{Maia, Options, agent_text, choose, updates_of};

/// A window of 32k tokens: 10 % of it is 13,107 bytes of definitions.
fn small_window() -> Value {
    json!({"contextWindows": {"mock-model": 32768}})
}

/// The mock server `name` for `session/new`, with `env` as (name, value).
fn server(name: &str, env: &[(&str, &str)]) -> Value {
    let env: Vec<Value> = env
        .iter()
        .map(|(k, v)| json!({"name": k, "value": v}))
        .collect();
    json!({"name": name, "command": mock_mcp(), "args": [], "env": env})
}

/// The mock with 20 heavy tools (about 16 KB of definitions).
fn heavy(name: &str) -> Value {
    server(name, &[("MOCK_MCP_EXTRA_TOOLS", "20")])
}

async fn start(settings: Value) -> Maia {
    let mut maia = Maia::start_with(Options {
        settings,
        ..Options::default()
    })
    .await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    maia
}

/// Opens (`session/new`) or reopens (`session/load` of `sid`) a session
/// with `servers` and waits until `name` connected; returns the id.
async fn open(maia: &mut Maia, sid: Option<&str>, servers: Value, name: &str) -> String {
    let cwd = maia.cwd();
    let id = match sid {
        None => {
            maia.request("session/new", json!({"cwd": cwd, "mcpServers": servers}))
                .await
        }
        Some(sid) => {
            maia.request(
                "session/load",
                json!({"sessionId": sid, "cwd": cwd, "mcpServers": servers}),
            )
            .await
        }
    };
    let (resp, _) = maia.response(id).await;
    assert!(resp["error"].is_null(), "{resp}");
    let sid = sid
        .map(str::to_owned)
        .or_else(|| resp["result"]["sessionId"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no sessionId in {resp}"));
    connected(maia, name).await;
    sid
}

/// Waits (at most 60 s) for server `name`'s connected notice.
async fn connected(maia: &mut Maia, name: &str) {
    let ok = format!("MCP server `{name}` connected");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let titles: Vec<String> = updates_of(&maia.seen, "notice")
            .iter()
            .filter_map(|n| n["title"].as_str().map(str::to_owned))
            .collect();
        if titles.iter().any(|t| t.contains(&ok)) {
            return;
        }
        assert!(
            !titles
                .iter()
                .any(|t| t.contains(&format!("`{name}` failed"))),
            "{titles:?}"
        );
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "MCP server `{name}` did not connect");
        maia.next_within(left).await;
    }
}

/// The tools offered in `request`, by name.
fn names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The definition of `tool` in `request`.
fn definition(request: &Value, tool: &str) -> Option<Value> {
    request["tools"]
        .as_array()?
        .iter()
        .find(|t| t["function"]["name"] == tool)
        .map(|t| t["function"].clone())
}

/// The `tool` message contents of `request`.
fn tool_messages(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn system_prompt(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn last_request(maia: &Maia) -> Value {
    maia.mock.requests().last().cloned().unwrap()
}

/// Answers one prompt with "ok"; returns the request it made.
async fn plain_turn(maia: &mut Maia, sid: &str, text: &str) -> Value {
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(sid, text).await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    last_request(maia)
}

#[tokio::test]
async fn a_heavy_servers_tools_are_offered_by_name_and_loaded_for_the_rest_of_the_thread() {
    let mut maia = start(small_window()).await;
    let sid = open(&mut maia, None, json!([heavy("mock")]), "mock").await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "s1",
        "ToolSearch",
        json!({"query": "select:mcp__mock__echo"}),
    )]));
    maia.mock.push(mock::tool_calls_reply(&[(
        "e1",
        "mcp__mock__echo",
        json!({"text": "hi"}),
    )]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(&sid, "echo hi").await;
    let (resp, before) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let requests = maia.mock.requests();

    // First request: the built-in tools whole, the server's by name only.
    let first = &requests[0];
    let offered = names(first);
    assert!(offered.contains(&"Read".to_owned()), "{offered:?}");
    assert!(
        !offered.iter().any(|n| n.starts_with("mcp__")),
        "{offered:?}"
    );
    let search = definition(first, "ToolSearch").expect("ToolSearch offered");
    let listing = search["description"].as_str().unwrap();
    assert!(
        listing.contains("\n- mcp__mock__echo: Returns its input"),
        "{listing}"
    );
    assert!(
        listing.contains("\n- mcp__mock__extra_20: Extra operation number 20: returns its input."),
        "{listing}"
    );
    assert!(
        !listing.contains("It exists so that"),
        "only the first line: {listing}"
    );

    // The search answered with the full definition; the next request
    // carries it, and the listing no longer names it.
    let second = &requests[1];
    let found = &tool_messages(second)[0];
    assert!(found.starts_with("Loaded 1 tool"), "{found}");
    assert!(found.contains("\"name\":\"mcp__mock__echo\""), "{found}");
    assert!(found.contains("Text to echo"), "{found}");
    let echo = definition(second, "mcp__mock__echo").expect("echo loaded");
    assert_eq!(echo["parameters"]["required"], json!(["text"]));
    assert!(definition(second, "mcp__mock__extra_1").is_none());
    let listing = definition(second, "ToolSearch").unwrap()["description"].to_string();
    assert!(!listing.contains("- mcp__mock__echo:"), "{listing}");
    // The search asked nothing; the call asked once.
    let asked = before
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .count();
    assert_eq!(asked, 1);
    assert_eq!(tool_messages(&requests[2])[1], "echo: hi");

    // A new process loading the thread offers it whole at once.
    let mut maia = maia.restart().await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    open(&mut maia, Some(&sid), json!([heavy("mock")]), "mock").await;
    let reloaded = plain_turn(&mut maia, &sid, "again").await;
    assert!(
        definition(&reloaded, "mcp__mock__echo").is_some(),
        "{:?}",
        names(&reloaded)
    );
    assert!(definition(&reloaded, "mcp__mock__extra_1").is_none());

    // So does the thread after a compaction.
    maia.mock.push(mock::text_reply("summary"));
    let id = maia.prompt(&sid, "/compact").await;
    maia.response(id).await;
    let compacted = plain_turn(&mut maia, &sid, "after the compaction").await;
    assert!(system_prompt(&compacted).contains("summary"));
    assert!(
        definition(&compacted, "mcp__mock__echo").is_some(),
        "{:?}",
        names(&compacted)
    );

    // `/clear` starts over: the server's tools are by name again.
    let id = maia.prompt(&sid, "/clear").await;
    maia.response(id).await;
    let cleared = plain_turn(&mut maia, &sid, "fresh").await;
    assert!(
        definition(&cleared, "mcp__mock__echo").is_none(),
        "{:?}",
        names(&cleared)
    );
    assert!(definition(&cleared, "ToolSearch").is_some());
}

#[tokio::test]
async fn a_deferred_tool_called_by_name_runs_and_is_loaded() {
    let mut maia = start(small_window()).await;
    let sid = open(&mut maia, None, json!([heavy("mock")]), "mock").await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "e1",
        "mcp__mock__extra_3",
        json!({"text": "direct"}),
    )]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(&sid, "use extra 3").await;
    let (resp, _) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let requests = maia.mock.requests();
    assert!(definition(&requests[0], "mcp__mock__extra_3").is_none());
    assert_eq!(tool_messages(&requests[1]), ["echo: direct"]);
    let extra = definition(&requests[1], "mcp__mock__extra_3").expect("loaded by its call");
    assert!(extra["parameters"]["properties"]["repository"].is_object());
    assert!(definition(&requests[1], "mcp__mock__extra_4").is_none());
}

#[tokio::test]
async fn the_window_decides_and_the_setting_forces_either_way() {
    // A big window: the same server stays whole, without ToolSearch.
    let mut maia = start(json!({"contextWindows": {"mock-model": 400000}})).await;
    let sid = open(&mut maia, None, json!([heavy("big")]), "big").await;
    let request = plain_turn(&mut maia, &sid, "hi").await;
    assert!(definition(&request, "mcp__big__extra_20").is_some());
    assert!(
        definition(&request, "ToolSearch").is_none(),
        "{:?}",
        names(&request)
    );
    // `/mcp` says what a request carries.
    let id = maia.prompt(&sid, "/mcp").await;
    let (_, before) = maia.response(id).await;
    let said = agent_text(&before);
    assert!(
        said.contains("Their 24 tool definitions are sent whole ("),
        "{said}"
    );
    assert!(
        said.contains("offered by name only past 160000 bytes"),
        "{said}"
    );

    // `false`: whole even in a small window.
    let mut maia =
        start(json!({"contextWindows": {"mock-model": 32768}, "mcpToolSearch": false})).await;
    let sid = open(&mut maia, None, json!([heavy("mock")]), "mock").await;
    let request = plain_turn(&mut maia, &sid, "hi").await;
    assert!(definition(&request, "mcp__mock__extra_20").is_some());
    assert!(definition(&request, "ToolSearch").is_none());

    // `true`: even a small server is on demand; `/mcp` counts both sides.
    let mut maia = start(json!({"mcpToolSearch": true})).await;
    let sid = open(&mut maia, None, json!([server("small", &[])]), "small").await;
    let request = plain_turn(&mut maia, &sid, "hi").await;
    assert!(definition(&request, "mcp__small__echo").is_none());
    let listing = definition(&request, "ToolSearch").unwrap()["description"].to_string();
    assert!(
        listing.contains("- mcp__small__slow: Sleeps 30 seconds"),
        "{listing}"
    );
    let id = maia.prompt(&sid, "/mcp").await;
    let (_, before) = maia.response(id).await;
    let said = agent_text(&before);
    assert!(
        said.contains("Tools on demand (`mcpToolSearch`): 4 offered by name only ("),
        "{said}"
    );
    assert!(said.contains("0 loaded (0 bytes sent)"), "{said}");

    // A percentage: 0 % puts any server on demand.
    let mut maia = start(json!({"mcpToolSearch": 0})).await;
    let sid = open(&mut maia, None, json!([server("small", &[])]), "small").await;
    let request = plain_turn(&mut maia, &sid, "hi").await;
    assert!(definition(&request, "mcp__small__echo").is_none());
    assert!(definition(&request, "ToolSearch").is_some());
}

#[tokio::test]
async fn a_search_by_words_loads_the_best_matches_and_a_miss_lists_the_names() {
    let mut maia = start(json!({"mcpToolSearch": true})).await;
    let sid = open(&mut maia, None, json!([server("mock", &[])]), "mock").await;
    maia.mock.push(mock::tool_calls_reply(&[
        ("s1", "ToolSearch", json!({"query": "png image"})),
        ("s2", "ToolSearch", json!({"query": "weather forecast"})),
    ]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(&sid, "find tools").await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let second = last_request(&maia);
    let results = tool_messages(&second);
    assert!(
        results[0].contains("\"name\":\"mcp__mock__picture\""),
        "{results:?}"
    );
    assert!(!results[0].contains("mcp__mock__echo"), "{results:?}");
    assert!(
        results[1].starts_with("No tool matches `weather forecast`. The tools to load are: mcp__mock__echo, mcp__mock__picture"),
        "{results:?}"
    );
    assert!(definition(&second, "mcp__mock__picture").is_some());
    assert!(definition(&second, "mcp__mock__echo").is_none());
}

#[tokio::test]
async fn a_servers_instructions_reach_the_system_prompt_under_its_name_capped() {
    let long = format!("Always greet with echo. {}", "¤".repeat(3_000));
    let mut maia = start(json!({})).await;
    let sid = open(
        &mut maia,
        None,
        json!([
            server(
                "guide",
                &[(
                    "MOCK_MCP_INSTRUCTIONS",
                    "Use `echo` to greet; never call `slow`."
                )]
            ),
            server("long", &[("MOCK_MCP_INSTRUCTIONS", &long)]),
            server("quiet", &[]),
        ]),
        "guide",
    )
    .await;
    connected(&mut maia, "long").await;
    connected(&mut maia, "quiet").await;
    let request = plain_turn(&mut maia, &sid, "hi").await;
    let prompt = system_prompt(&request);
    assert!(
        prompt.contains("# Instructions from MCP servers"),
        "{prompt}"
    );
    assert!(
        prompt.contains("## MCP server `guide`\n\nUse `echo` to greet; never call `slow`."),
        "{prompt}"
    );
    assert!(prompt.contains("## MCP server `long`\n\nAlways greet with echo. ¤¤¤"));
    assert_eq!(
        prompt.matches('¤').count(),
        2_048 - "Always greet with echo. ".len()
    );
    assert!(prompt.contains(
        "[… cut: the server's instructions are 3024 characters; the first 2048 are kept]"
    ));
    assert!(
        !prompt.contains("`quiet`"),
        "a server without instructions has no heading"
    );
    // Before the environment section, and `/mcp` says where they went.
    let id = maia.prompt(&sid, "/mcp").await;
    let (_, before) = maia.response(id).await;
    let said = agent_text(&before);
    assert!(
        said.contains("its instructions (3024 characters, cut to 2048) are in the system prompt"),
        "{said}"
    );
}

/// A project's server (`<project>/.maia/settings.json`) is not the user's:
/// its instructions stay out of the system prompt until `/mcp trust`.
#[tokio::test]
async fn a_projects_untrusted_server_says_nothing_to_the_model_until_trusted() {
    let mut maia = start(json!({
        "mcpServers": {"mine": {"command": mock_mcp(), "env": {"MOCK_MCP_INSTRUCTIONS": "From the user's server."}}}
    }))
    .await;
    let file = maia.path(".maia/settings.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let entry = json!({"command": mock_mcp(), "env": {"MOCK_MCP_INSTRUCTIONS": "From the project's server."}});
    std::fs::write(&file, json!({"mcpServers": {"proj": entry}}).to_string()).unwrap();
    let sid = open(&mut maia, None, json!([]), "mine").await;
    connected(&mut maia, "proj").await;
    let request = plain_turn(&mut maia, &sid, "hi").await;
    let prompt = system_prompt(&request);
    assert!(
        prompt.contains("## MCP server `mine`\n\nFrom the user's server."),
        "{prompt}"
    );
    assert!(!prompt.contains("From the project's server."), "{prompt}");
    let id = maia.prompt(&sid, "/mcp").await;
    let (_, before) = maia.response(id).await;
    let said = agent_text(&before);
    assert!(
        said.contains("its instructions (26 characters) are not given to the model: it is the project's, not trusted"),
        "{said}"
    );

    let id = maia.prompt(&sid, "/mcp trust proj").await;
    let (_, before) = maia.response(id).await;
    assert!(agent_text(&before).contains("Trusted"));
    maia.seen.clear();
    let sid = open(&mut maia, None, json!([]), "proj").await;
    let request = plain_turn(&mut maia, &sid, "hi").await;
    let prompt = system_prompt(&request);
    assert!(
        prompt.contains("## MCP server `proj`\n\nFrom the project's server."),
        "{prompt}"
    );
}

/// The reference server, on two threads that differ only in
/// `mcpToolSearch`: the same prompt, the same call of its `echo`. Prints
/// the request bytes of both (the numbers docs/tools.md gives).
#[tokio::test]
async fn reference_server_everything_on_demand_saves_request_bytes() {
    let Some(command) = std::env::var("MAIA_MCP_EVERYTHING").ok() else {
        mock::require(
            "the reference MCP server: MAIA_MCP_EVERYTHING (.ci/run installs it from npm)",
            false,
        );
        return;
    };
    let everything =
        json!([{"name": "everything", "command": command, "args": ["stdio"], "env": []}]);
    let mut sizes = Vec::new();
    for setting in [json!(false), json!(true)] {
        let mut maia = start(json!({"mcpToolSearch": setting})).await;
        let sid = open(&mut maia, None, everything.clone(), "everything").await;
        let lazy = setting == json!(true);
        if lazy {
            maia.mock.push(mock::tool_calls_reply(&[(
                "s1",
                "ToolSearch",
                json!({"query": "select:mcp__everything__echo"}),
            )]));
        }
        maia.mock.push(mock::tool_calls_reply(&[(
            "e1",
            "mcp__everything__echo",
            json!({"message": "interop hello"}),
        )]));
        maia.mock.push(mock::text_reply("done"));
        let id = maia.prompt(&sid, "echo through the reference server").await;
        let (resp, _) = maia.response_with(id, choose("allow_once")).await;
        assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
        // A second, plain turn: what every later request of the thread costs.
        let later = plain_turn(&mut maia, &sid, "thanks").await;
        let requests = maia.mock.requests();
        let results = tool_messages(requests.last().unwrap());
        assert!(
            results.iter().any(|r| r.contains("interop hello")),
            "{results:?}"
        );
        let bytes: Vec<usize> = requests.iter().map(|r| r.to_string().len()).collect();
        let tools = |r: &Value| r["tools"].to_string().len();
        eprintln!(
            "server-everything, mcpToolSearch {setting}: request bytes {bytes:?}, \
             tools of the first request {} bytes, of the last {} bytes; {} tools offered first",
            tools(&requests[0]),
            tools(&later),
            names(&requests[0]).len()
        );
        // Its instructions are the user's server's: in the system prompt.
        assert!(system_prompt(&later).contains("## MCP server `everything`"));
        sizes.push((bytes[0], tools(&requests[0]), tools(&later)));
    }
    let (eager, lazy) = (sizes[0], sizes[1]);
    // Thirteen tools of about 5.5 KB are named in about 1.5 KB.
    assert!(
        eager.0 > lazy.0 + 3_000,
        "first request: eager {eager:?}, lazy {lazy:?}"
    );
    assert!(
        eager.2 > lazy.2 + 2_500,
        "after loading echo: eager {eager:?}, lazy {lazy:?}"
    );
}
