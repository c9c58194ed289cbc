//! `maia login`: connects MAIA to a LiteLLM proxy and saves the result in
//! `~/.maia/settings.json` (see [`crate::settings_file`]).
//!
//! Interactive: asks the proxy URL, the API key (not echoed on a terminal)
//! and, once the proxy answered with its models, the default model. The
//! questions are read from any line reader, so tests drive the real binary
//! through a pipe. With `--url` nothing is asked (`--key-env`, `--model`).
//! Every failure names its cause and its fix; the key is never printed.
//! Exit status 0 only when the settings were saved.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

use maia_core::EngineOptions;
use maia_llm::{ApiKey, LlmConfig};
use serde_json::{Value, json};

use crate::cli::LoginArgs;
use crate::probe::{self, Probe, Problem};

/// The URL offered when nothing is saved yet.
pub const DEFAULT_URL: &str = "http://localhost:4000";
/// The variable MAIA reads the key from at every start.
pub const KEY_VARIABLE: &str = "LITELLM_API_KEY";

/// Why the login did not finish.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("HOME is not set, so there is no ~/.maia/settings.json to write")]
    NoHome,
    #[error("the input ended before the login finished; nothing was saved")]
    InputEnded,
    #[error("cannot talk to the terminal: {0}")]
    Io(#[from] std::io::Error),
    #[error("the variable {0} is not set (or empty); export it, or leave out --key-env")]
    NoVariable(String),
    #[error("{problem}\n  Fix: {fix}")]
    Proxy { problem: Problem, fix: String },
    #[error(
        "the proxy does not list the model `{model}`; it lists: {listed}\n  Fix: give one of those with --model, or leave --model out to keep the saved one (else the first)"
    )]
    UnknownModel { model: String, listed: String },
    #[error(transparent)]
    Write(#[from] crate::settings_file::WriteError),
}

/// Where the key comes from after the login.
#[derive(Debug, Clone)]
enum Key {
    /// Saved in the settings file.
    Save(ApiKey),
    /// Read from `LITELLM_API_KEY` at every start (none saved).
    Variable(ApiKey),
    /// The one already saved, unchanged.
    Keep(ApiKey),
    /// No key at all.
    None,
}

impl Key {
    fn value(&self) -> Option<ApiKey> {
        match self {
            Key::Save(k) | Key::Variable(k) | Key::Keep(k) => Some(k.clone()),
            Key::None => None,
        }
    }

    /// The change to `LiteLLM_API_Key` (`None`: leave it alone).
    fn change(&self) -> Option<Option<Value>> {
        match self {
            Key::Save(k) => Some(Some(json!(k.expose()))),
            // The saved key would win over the variable: remove it.
            Key::Variable(_) | Key::None => Some(None),
            Key::Keep(_) => None,
        }
    }
}

/// What is saved in `~/.maia/settings.json` now.
struct Saved {
    path: PathBuf,
    url: Option<String>,
    key: Option<ApiKey>,
    model: Option<String>,
    /// The user's settings as MAIA reads them (endpoint paths, windows).
    llm: LlmConfig,
    windows: HashMap<String, u64>,
}

fn saved(options: &EngineOptions) -> Result<Saved, LoginError> {
    let home = options.home.as_deref().ok_or(LoginError::NoHome)?;
    let path = home.join(".maia").join("settings.json");
    let raw: Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let text = |key: &str| {
        raw.get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    // Read as MAIA does, without any project folder.
    let settings = maia_core::settings::load(Some(home), &home.join(".maia"), None);
    Ok(Saved {
        url: text("LiteLLM_URL"),
        key: text("LiteLLM_API_Key").map(ApiKey::new),
        model: text("model"),
        llm: settings.llm,
        windows: settings.context_windows,
        path,
    })
}

/// The terminal the questions come from and the answers go to.
pub struct Terminal<'a> {
    pub input: &'a mut dyn BufRead,
    pub out: &'a mut dyn Write,
    /// The input is a terminal (the key is then read without echo).
    pub tty: bool,
}

impl Terminal<'_> {
    fn ask(&mut self, question: &str) -> Result<String, LoginError> {
        write!(self.out, "{question}")?;
        self.out.flush()?;
        let mut line = String::new();
        if self.input.read_line(&mut line)? == 0 {
            writeln!(self.out)?;
            return Err(LoginError::InputEnded);
        }
        Ok(line.trim().to_owned())
    }

    fn ask_secret(&mut self, question: &str) -> Result<String, LoginError> {
        if !self.tty {
            return self.ask(question);
        }
        let _quiet = echo::Off::new()?;
        self.ask(question)
    }
}

/// Runs `maia login`. `model` is the global `--model`.
pub async fn run(
    args: &LoginArgs,
    model: Option<String>,
    options: &EngineOptions,
    term: &mut Terminal<'_>,
) -> Result<(), LoginError> {
    let saved = saved(options)?;
    let env_key = options.env_api_key.clone().map(ApiKey::new);
    if let Some(url) = &args.url {
        let key = match &args.key_env {
            Some(name) => {
                let value = std::env::var(name)
                    .ok()
                    .map(|v| v.trim().to_owned())
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| LoginError::NoVariable(name.clone()))?;
                if name == KEY_VARIABLE {
                    Key::Variable(ApiKey::new(value))
                } else {
                    Key::Save(ApiKey::new(value))
                }
            }
            None => match (&saved.key, env_key) {
                (Some(k), _) => Key::Keep(k.clone()),
                (None, Some(k)) => Key::Variable(k),
                (None, None) => Key::None,
            },
        };
        let url = clean_url(url);
        let found = check(&saved, &url, &key, term).await.map_err(|problem| {
            let fix = match problem {
                Problem::KeyRefused { .. } => {
                    "give a valid LiteLLM key with --key-env NAME (a variable holding it)"
                        .to_owned()
                }
                _ => problem.fix(),
            };
            LoginError::Proxy { problem, fix }
        })?;
        let chosen = match model {
            Some(m) if found.models.iter().any(|x| x.id == m) => m,
            Some(m) => {
                return Err(LoginError::UnknownModel {
                    model: m,
                    listed: found.ids().join(", "),
                });
            }
            None => saved
                .model
                .clone()
                .filter(|m| found.models.iter().any(|x| &x.id == m))
                .unwrap_or_else(|| found.ids().remove(0)),
        };
        show_models(&found, &saved.windows, term)?;
        return save(&saved, &url, &key, &chosen, term);
    }
    writeln!(
        term.out,
        "Connect MAIA to your LiteLLM proxy. The answers are saved in {}.\n",
        saved.path.display()
    )?;
    let mut default_url = saved.url.clone().unwrap_or_else(|| DEFAULT_URL.to_owned());
    loop {
        let answer = term.ask(&format!("Proxy URL [{default_url}]: "))?;
        let url = if answer.is_empty() {
            default_url.clone()
        } else {
            clean_url(&answer)
        };
        let keep = match (&env_key, &saved.key) {
            (Some(_), _) => format!("use the {KEY_VARIABLE} variable"),
            (None, Some(_)) => "keep the saved key".to_owned(),
            (None, None) => "no key".to_owned(),
        };
        let typed = term.ask_secret(&format!("API key (not shown; Enter: {keep}): "))?;
        let key = match (typed.is_empty(), &env_key, &saved.key) {
            (false, _, _) => Key::Save(ApiKey::new(typed)),
            (true, Some(k), _) => Key::Variable(k.clone()),
            (true, None, Some(k)) => Key::Keep(k.clone()),
            (true, None, None) => Key::None,
        };
        let found = match check(&saved, &url, &key, term).await {
            Ok(found) => found,
            Err(problem) => {
                let fix = problem.fix_in_login();
                writeln!(term.out, "✗ {problem}\n  Fix: {fix}")?;
                let again = term.ask("Try again? [Y/n] ")?;
                if again.eq_ignore_ascii_case("n") || again.eq_ignore_ascii_case("no") {
                    return Err(LoginError::Proxy { problem, fix });
                }
                default_url = url;
                continue;
            }
        };
        show_models(&found, &saved.windows, term)?;
        let ids = found.ids();
        let preferred = model
            .clone()
            .or_else(|| saved.model.clone())
            .and_then(|m| ids.iter().position(|x| *x == m))
            .unwrap_or(0);
        let chosen = loop {
            let answer = term.ask(&format!("Default model [{}]: ", preferred + 1))?;
            if answer.is_empty() {
                break ids[preferred].clone();
            }
            if let Some(i) = answer
                .parse::<usize>()
                .ok()
                .filter(|i| (1..=ids.len()).contains(i))
            {
                break ids[i - 1].clone();
            }
            if ids.contains(&answer) {
                break answer;
            }
            writeln!(
                term.out,
                "  Type a number from 1 to {} or a model's name.",
                ids.len()
            )?;
        };
        return save(&saved, &url, &key, &chosen, term);
    }
}

/// The URL as typed, without surrounding space and trailing slashes.
fn clean_url(url: &str) -> String {
    url.trim().trim_end_matches('/').to_owned()
}

async fn check(
    saved: &Saved,
    url: &str,
    key: &Key,
    term: &mut Terminal<'_>,
) -> Result<Probe, Problem> {
    let mut llm = saved.llm.clone();
    llm.base_url = url.to_owned();
    llm.api_key = key.value();
    let _ = writeln!(term.out, "Checking {} …", llm.join(&llm.models_endpoint));
    let _ = term.out.flush();
    probe::probe(&llm).await
}

fn show_models(
    found: &Probe,
    manual: &HashMap<String, u64>,
    term: &mut Terminal<'_>,
) -> Result<(), LoginError> {
    let count = found.models.len();
    writeln!(
        term.out,
        "✓ The proxy answers and lists {count} model{}:",
        if count == 1 { "" } else { "s" }
    )?;
    let width = found
        .models
        .iter()
        .map(|m| m.id.chars().count())
        .max()
        .unwrap_or(0);
    for (i, m) in found.models.iter().enumerate() {
        let window = match found.window(&m.id, manual) {
            Some((tokens, source)) => format!(
                "{} tokens ({})",
                probe::thousands(tokens),
                probe::source_label(source)
            ),
            None => "window unknown (MAIA asks the model on first use)".to_owned(),
        };
        writeln!(term.out, "  {:>2}  {:<width$}  {window}", i + 1, m.id)?;
    }
    Ok(())
}

fn save(
    saved: &Saved,
    url: &str,
    key: &Key,
    model: &str,
    term: &mut Terminal<'_>,
) -> Result<(), LoginError> {
    let mut changes = vec![("LiteLLM_URL", Some(json!(url)))];
    if let Some(change) = key.change() {
        changes.push(("LiteLLM_API_Key", change));
    }
    changes.push(("model", Some(json!(model))));
    crate::settings_file::update(&saved.path, &changes)?;
    let key_note = match key {
        Key::Save(_) => "the key is saved in the file (mode 0600)".to_owned(),
        Key::Variable(_) => format!("the key is read from {KEY_VARIABLE} at every start"),
        Key::Keep(_) => "the saved key is kept".to_owned(),
        Key::None => "no key".to_owned(),
    };
    writeln!(
        term.out,
        "✓ Saved {}: proxy {url}, default model {model}; {key_note}.",
        saved.path.display()
    )?;
    writeln!(
        term.out,
        "Next: add MAIA to your editor (command `maia`, arguments `acp`), or run `maia doctor`."
    )?;
    Ok(())
}

/// Terminal echo, off while the key is typed.
mod echo {
    #[cfg(unix)]
    pub struct Off(Option<nix::sys::termios::Termios>);

    #[cfg(unix)]
    impl Off {
        pub fn new() -> std::io::Result<Off> {
            use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
            let stdin = std::io::stdin();
            let Ok(before) = tcgetattr(&stdin) else {
                return Ok(Off(None));
            };
            let mut quiet = before.clone();
            quiet.local_flags.remove(LocalFlags::ECHO);
            quiet.local_flags.insert(LocalFlags::ECHONL);
            tcsetattr(&stdin, SetArg::TCSANOW, &quiet).map_err(std::io::Error::from)?;
            Ok(Off(Some(before)))
        }
    }

    #[cfg(unix)]
    impl Drop for Off {
        fn drop(&mut self) {
            if let Some(before) = &self.0 {
                let _ = nix::sys::termios::tcsetattr(
                    std::io::stdin(),
                    nix::sys::termios::SetArg::TCSANOW,
                    before,
                );
            }
        }
    }

    #[cfg(not(unix))]
    pub struct Off;

    #[cfg(not(unix))]
    impl Off {
        pub fn new() -> std::io::Result<Off> {
            Ok(Off)
        }
    }
}
