//! Command-line arguments.

use std::path::PathBuf;

use maia_core::EngineOptions;

pub const USAGE: &str = "\
Usage: maia acp [--model MODEL]
       maia lsp [--model MODEL]
       maia --version | --help

  acp              serve the Agent Client Protocol on stdin/stdout
  lsp              serve the Language Server Protocol on stdin/stdout
  --model MODEL    model to use (else MAIA_MODEL, the `model` setting,
                   or the first model the endpoint lists)

Settings: ~/.maia/settings.json and <cwd>/.maia/settings.json
Environment: LITELLM_API_KEY, MAIA_MODEL, MAIA_LOG (e.g. debug), MAIA_LOG_FILE";

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Acp(Options),
    Lsp(Options),
    Help,
    Version,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub model: Option<String>,
}

impl Options {
    pub fn engine_options(self) -> EngineOptions {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        EngineOptions {
            home: env("HOME").map(PathBuf::from),
            model: self.model.or_else(|| env("MAIA_MODEL")),
            env_api_key: env("LITELLM_API_KEY"),
        }
    }
}

pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, String> {
    let mut args = args.into_iter();
    let mut command = None;
    let mut options = Options::default();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" | "help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "acp" if command.is_none() => command = Some("acp"),
            "lsp" if command.is_none() => command = Some("lsp"),
            "--model" => {
                options.model = Some(args.next().ok_or("--model needs a value")?);
            }
            other => {
                if let Some(model) = other.strip_prefix("--model=") {
                    options.model = Some(model.to_owned());
                } else {
                    return Err(format!("unexpected argument `{other}`"));
                }
            }
        }
    }
    match command {
        Some("lsp") => Ok(Command::Lsp(options)),
        Some(_) => Ok(Command::Acp(options)),
        None => Err("missing command".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Command, String> {
        parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn parses() {
        assert_eq!(p(&["acp"]), Ok(Command::Acp(Options::default())));
        assert_eq!(
            p(&["acp", "--model", "m"]),
            Ok(Command::Acp(Options {
                model: Some("m".into())
            }))
        );
        assert_eq!(
            p(&["--model=x", "acp"]),
            Ok(Command::Acp(Options {
                model: Some("x".into())
            }))
        );
        assert_eq!(p(&["lsp"]), Ok(Command::Lsp(Options::default())));
        assert_eq!(p(&["--version"]), Ok(Command::Version));
        assert!(p(&[]).is_err());
        assert!(p(&["acp", "--model"]).is_err());
        assert!(p(&["lsp2"]).is_err());
    }
}
