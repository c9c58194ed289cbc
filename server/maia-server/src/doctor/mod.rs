//! `maia doctor`: checks, without asking anything, what a session in a
//! folder would use: the settings files, the proxy, the key, the model list
//! and the default model, each model's context window and its source, the
//! context file, skills, custom tools, MCP servers (started, listed,
//! stopped), language servers (those that serve this folder started and
//! stopped), the command sandbox (what the kernel offers, what holds) and
//! whether sessions offer web search (the proxy's search tools) and the
//! managed policy (what it enforces, or why MAIA would not start).
//! One line per check, `✓` or `✗` with the fix (`-` for an
//! optional thing that is absent). Exit status 0 only when a prompt can be
//! answered: the proxy answers, accepts the key and lists the model to use.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use maia_core::EngineOptions;
use maia_core::window::WindowSource;
use serde_json::{Value, json};

use crate::probe::{self, Probe};

mod machine;
use machine::{language_server_checks, sandbox_checks};

/// How long MCP servers get to start and list their tools.
const MCP_WAIT: Duration = Duration::from_secs(15);
/// Models shown one per line (the rest are counted).
const MAX_MODEL_LINES: usize = 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ok,
    /// Not there, and not needed.
    Absent,
    Failed,
}

struct Check {
    /// A stable id for `--json`.
    id: &'static str,
    state: State,
    message: String,
    fix: Option<String>,
    /// Answering a prompt needs this check to pass.
    blocking: bool,
}

impl Check {
    fn ok(id: &'static str, message: impl Into<String>) -> Check {
        Check {
            id,
            state: State::Ok,
            message: message.into(),
            fix: None,
            blocking: false,
        }
    }

    fn absent(id: &'static str, message: impl Into<String>) -> Check {
        Check {
            state: State::Absent,
            ..Check::ok(id, message)
        }
    }

    fn failed(id: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            state: State::Failed,
            fix: Some(fix.into()),
            ..Check::ok(id, message)
        }
    }

    fn blocking(mut self) -> Check {
        self.blocking = true;
        self
    }
}

/// Runs every check for `cwd` and prints them to `out`; returns whether a
/// prompt can be answered.
pub async fn run(
    options: &EngineOptions,
    cwd: &Path,
    json_out: bool,
    out: &mut dyn Write,
) -> std::io::Result<bool> {
    let checks = checks(options, cwd).await;
    let ready = checks
        .iter()
        .all(|c| !(c.blocking && c.state == State::Failed));
    if json_out {
        let value = json!({
            "ready": ready,
            "cwd": cwd.display().to_string(),
            "checks": checks.iter().map(|c| json!({
                "id": c.id,
                "ok": c.state != State::Failed,
                "state": match c.state { State::Ok => "ok", State::Absent => "absent", State::Failed => "failed" },
                "blocking": c.blocking,
                "message": c.message,
                "fix": c.fix,
            })).collect::<Vec<Value>>(),
        });
        writeln!(out, "{value}")?;
        return Ok(ready);
    }
    writeln!(out, "MAIA doctor for {}", cwd.display())?;
    for c in &checks {
        let mark = match c.state {
            State::Ok => "✓",
            State::Absent => "-",
            State::Failed => "✗",
        };
        writeln!(out, "{mark} {}", c.message)?;
        if let Some(fix) = &c.fix {
            writeln!(out, "    fix: {fix}")?;
        }
    }
    if ready {
        writeln!(out, "\nReady: MAIA can answer a prompt here.")?;
    } else {
        writeln!(
            out,
            "\nNot ready: fix the ✗ lines above (`maia login` sets the proxy, key and model)."
        )?;
    }
    Ok(ready)
}

async fn checks(options: &EngineOptions, cwd: &Path) -> Vec<Check> {
    let mut checks = Vec::new();
    let home = options.home.as_deref();
    let settings = maia_core::settings::load_with(options, cwd);
    checks.push(policy_check());

    // Settings files.
    for file in maia_core::settings::files(home, cwd) {
        let shown = file.display().to_string();
        match std::fs::read_to_string(&file) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                checks.push(Check::absent("settings", format!("{shown}: not there")));
            }
            Err(e) => checks.push(Check::failed(
                "settings",
                format!("{shown}: cannot be read ({e})"),
                "make the file readable, or remove it",
            )),
            Ok(text) => match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(_)) => checks.push(Check::ok("settings", format!("{shown}: valid"))),
                Ok(_) => checks.push(Check::failed(
                    "settings",
                    format!("{shown}: not a JSON object, ignored"),
                    "the file must hold one JSON object, e.g. {\"LiteLLM_URL\": \"http://localhost:4000\"}",
                )),
                Err(e) => checks.push(Check::failed(
                    "settings",
                    format!("{shown}: not valid JSON ({e}), ignored"),
                    "correct the JSON (no comments or trailing commas), or run `maia login` after removing it",
                )),
            },
        }
    }
    for warning in settings
        .warnings
        .iter()
        .filter(|w| !w.contains("not valid JSON") && !w.contains("not a JSON object"))
    {
        checks.push(Check::failed(
            "settings",
            warning.clone(),
            "correct this setting",
        ));
    }

    // Proxy, key, models.
    let llm = &settings.llm;
    let models_url = llm.join(&llm.models_endpoint);
    let key_source = if options.route.is_some() {
        "the editor's gateway headers"
    } else if settings.llm.api_key.is_none() {
        "none"
    } else if options.env_api_key.is_some() && raw_key_in_files(home, cwd).is_none() {
        "the LITELLM_API_KEY variable"
    } else {
        "LiteLLM_API_Key in the settings"
    };
    let found: Option<Probe> = match probe::probe(llm).await {
        Ok(found) => {
            checks.push(Check::ok(
                "proxy",
                format!(
                    "proxy answers at {}",
                    maia_llm::redact_userinfo(&llm.base_url)
                ),
            ));
            checks.push(Check::ok(
                "key",
                format!("key accepted (key: {key_source})"),
            ));
            Some(found)
        }
        Err(problem) => {
            let (reached, id) = match &problem {
                probe::Problem::KeyRefused { .. } => (true, "key"),
                probe::Problem::NoModels => (true, "models"),
                probe::Problem::WrongPath { .. }
                | probe::Problem::NotAProxy { .. }
                | probe::Problem::ServerError { .. } => (true, "proxy"),
                _ => (false, "proxy"),
            };
            if reached && id != "proxy" {
                checks.push(Check::ok(
                    "proxy",
                    format!(
                        "proxy answers at {}",
                        maia_llm::redact_userinfo(&llm.base_url)
                    ),
                ));
            }
            if id == "models" {
                checks.push(Check::ok(
                    "key",
                    format!("key accepted (key: {key_source})"),
                ));
            }
            checks.push(
                Check::failed(id, format!("{problem} (asked {models_url})"), problem.fix())
                    .blocking(),
            );
            None
        }
    };
    if let Some(found) = &found {
        let ids = found.ids();
        checks.push(Check::ok(
            "models",
            format!(
                "{} model{} listed",
                ids.len(),
                if ids.len() == 1 { "" } else { "s" }
            ),
        ));
        let (model, from) = match (&options.model, &settings.model) {
            (Some(m), _) => (m.clone(), "--model or MAIA_MODEL"),
            (None, Some(m)) => (m.clone(), "the `model` setting"),
            (None, None) => (ids[0].clone(), "the first listed"),
        };
        if ids.contains(&model) {
            checks.push(
                Check::ok(
                    "model",
                    format!("default model {model} (from {from}) is listed"),
                )
                .blocking(),
            );
        } else {
            checks.push(
                Check::failed(
                    "model",
                    format!("default model {model} (from {from}) is not listed by the proxy"),
                    format!(
                        "choose one of the listed models: `maia login`, or set `model` in ~/.maia/settings.json ({})",
                        shorten_list(&ids)
                    ),
                )
                .blocking(),
            );
        }
        for id in ids.iter().take(MAX_MODEL_LINES) {
            let marker = if *id == model { " (default)" } else { "" };
            // A model's own answer, kept by an earlier session, comes after the proxy's routes.
            let asked = || {
                let disk = maia_core::window::DiskCache::in_home(home?);
                let entry = disk.get(llm.base_url.trim_end_matches('/'), id)?;
                Some(
                    entry
                        .tokens
                        .map(|t| (t, WindowSource::AskedModel))
                        .ok_or(entry.date),
                )
            };
            let window = match found.window(id, &settings.context_windows) {
                Some(found) => Some(Ok(found)),
                None => asked(),
            };
            match window {
                Some(Err(date)) => checks.push(Check::absent(
                    "window",
                    format!(
                        "{id}{marker}: window unknown; the model could not tell it ({date}; delete its entry in ~/.maia/cache/windows.json to ask again, or set contextWindows)"
                    ),
                )),
                Some(Ok((tokens, source))) => checks.push(Check::ok(
                    "window",
                    format!(
                        "{id}{marker}: {} tokens, from {}",
                        probe::thousands(tokens),
                        probe::source_label(source)
                    ),
                )),
                None => checks.push(Check::absent(
                    "window",
                    format!(
                        "{id}{marker}: window not reported; a session asks the model (or set contextWindows)"
                    ),
                )),
            }
        }
        if ids.len() > MAX_MODEL_LINES {
            checks.push(Check::ok(
                "window",
                format!("… and {} more models", ids.len() - MAX_MODEL_LINES),
            ));
        }
    }

    // Web search through the proxy (only when it answered).
    if found.is_some() {
        checks.push(web_search_check(llm, &settings.web_search).await);
    }

    // The project's files.
    let instructions = maia_core::context_file::load(home, cwd);
    for (file, why) in instructions.files.iter().map(|f| (f, f.scope.why())) {
        let cut = if file.cut { ", cut" } else { "" };
        let text = format!(
            "instruction file {} ({why}, {} characters{cut})",
            file.path.display(),
            file.chars
        );
        checks.push(Check::ok("context_file", text));
    }
    for warning in &instructions.warnings {
        let fix = "make it a readable regular file inside the project, or remove it";
        checks.push(Check::failed("context_file", warning.clone(), fix));
    }
    if instructions.files.is_empty() {
        let names = maia_core::context_file::NAMES.join(", ");
        let (root, user) = (instructions.root.display(), "MAIA.md, AGENTS.md in ~/.maia");
        let text = format!(
            "no instruction file ({names} from {root} down to {}, {user})",
            cwd.display()
        );
        checks.push(Check::absent("context_file", text));
    }
    let skills = maia_core::skills::load(home, cwd);
    if skills.skills.is_empty() {
        checks.push(Check::absent("skills", "no skills"));
    } else {
        let names: Vec<String> = skills.skills.iter().map(|s| s.name.clone()).collect();
        checks.push(Check::ok(
            "skills",
            format!(
                "{} skill{}: {}",
                names.len(),
                plural(names.len()),
                shorten_list(&names)
            ),
        ));
    }
    for warning in &skills.warnings {
        checks.push(Check::failed(
            "skills",
            warning.clone(),
            "correct or remove that skill",
        ));
    }
    let tools = maia_core::custom_tools::load(cwd, &maia_core::reserved_tool_names());
    if tools.tools.is_empty() {
        checks.push(Check::absent("custom_tools", "no custom tools"));
    } else {
        let names: Vec<String> = tools.tools.iter().map(|t| t.name.clone()).collect();
        checks.push(Check::ok(
            "custom_tools",
            format!(
                "{} custom tool{}: {}",
                names.len(),
                plural(names.len()),
                shorten_list(&names)
            ),
        ));
    }
    for warning in &tools.warnings {
        checks.push(Check::failed(
            "custom_tools",
            warning.clone(),
            "correct or remove that tool's definition",
        ));
    }

    // MCP servers: started, listed, stopped.
    if settings.mcp_servers.is_empty() {
        checks.push(Check::absent("mcp", "no MCP servers in the settings"));
    } else {
        // A project's untrusted server is not run outside the sandbox
        // (docs/permissions.md, "MCP servers: whose they are").
        let how = maia_core::mcp_trust::confinement(
            maia_core::mcp_trust::Place {
                home,
                cwd,
                sandboxed: false,
            },
            &settings.mcp_servers,
            &[],
            &settings,
        );
        let (run, held): (Vec<_>, Vec<_>) = settings.mcp_servers.iter().cloned().partition(|s| {
            !matches!(
                how.get(&s.name),
                Some(maia_mcp::Confinement::Sandboxed { .. })
            )
        });
        for server in held {
            checks.push(Check::absent(
                "mcp",
                format!(
                    "MCP server {}: the project's, not started here until you trust it \
                     (`/mcp trust {}` in a session)",
                    server.name, server.name
                ),
            ));
        }
        let manager = maia_mcp::McpManager::start(run);
        manager.wait_ready(MCP_WAIT).await;
        for status in manager.status() {
            match status.state {
                maia_mcp::ServerState::Connected { tools } => checks.push(Check::ok(
                    "mcp",
                    format!(
                        "MCP server {}: {} tool{}{}",
                        status.name,
                        tools.len(),
                        plural(tools.len()),
                        if tools.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", shorten_list(&tools))
                        }
                    ),
                )),
                maia_mcp::ServerState::Failed(e) => checks.push(Check::failed(
                    "mcp",
                    format!("MCP server {}: {e}", status.name),
                    "check its command or url in mcpServers",
                )),
                maia_mcp::ServerState::Starting => checks.push(Check::failed(
                    "mcp",
                    format!(
                        "MCP server {}: still starting after {} s",
                        status.name,
                        MCP_WAIT.as_secs()
                    ),
                    "check that the server starts and answers `initialize`",
                )),
            }
        }
        manager.shutdown();
    }
    checks.extend(language_server_checks(home, cwd).await);
    checks.extend(sandbox_checks(home, cwd));
    checks
}

/// A key written in one of the settings files (not its value's content).
/// Whether sessions offer `WebSearch`: the proxy's search tools and the
/// `webSearchTool` setting ([`maia_core::web_search::find`]).
async fn web_search_check(
    llm: &maia_llm::LlmConfig,
    choice: &maia_core::web_search::Choice,
) -> Check {
    use maia_core::web_search::Found;
    let Ok(client) = maia_llm::LlmClient::new(llm.clone()) else {
        return Check::absent("web_search", "web search: no client for the proxy");
    };
    let found = maia_core::web_search::find(&client, choice).await;
    let text = found.describe();
    match found {
        Found::Tool(_) => Check::ok("web_search", format!("{text} (WebSearch offered)")),
        Found::Off => Check::absent("web_search", text),
        Found::NoneListed => Check::absent(
            "web_search",
            format!(
                "{text} (add one under `search_tools:` in the proxy's config to offer WebSearch)"
            ),
        ),
        Found::NotListed { .. } => Check::failed(
            "web_search",
            text,
            "set webSearchTool to a search tool the proxy lists, or remove it to use the first",
        ),
        Found::Failed(_) => Check::failed(
            "web_search",
            text,
            "see the proxy's log; WebSearch is not offered until the list can be read",
        ),
    }
}

fn raw_key_in_files(home: Option<&Path>, cwd: &Path) -> Option<()> {
    maia_core::settings::files(home, cwd).iter().find_map(|f| {
        let text = std::fs::read_to_string(f).ok()?;
        let value: Value = serde_json::from_str(&text).ok()?;
        value
            .get("LiteLLM_API_Key")
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(|_| ())
    })
}

/// The managed policy: none, what it enforces, or why MAIA refuses to
/// start (a blocking failure).
fn policy_check() -> Check {
    let path = crate::cli::policy_path();
    match maia_core::policy::ManagedPolicy::read(&path) {
        Ok(None) => Check::absent(
            "policy",
            format!("managed policy: none ({} not there)", path.display()),
        ),
        Ok(Some(policy)) => {
            let lines = policy.lines();
            let said = if lines.is_empty() {
                "nothing to enforce".to_owned()
            } else {
                lines.join("; ")
            };
            Check::ok(
                "policy",
                format!("managed policy {} in force: {said}", path.display()),
            )
        }
        Err(e) => Check::failed(
            "policy",
            e.to_string(),
            "correct the policy file (its administrator's); MAIA does not start while it cannot be applied",
        )
        .blocking(),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn shorten_list(items: &[String]) -> String {
    const SHOWN: usize = 8;
    let mut out = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        out.push_str(&format!(", … ({} more)", items.len() - SHOWN));
    }
    out
}
