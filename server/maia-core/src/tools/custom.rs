//! The project's custom tools (`.maia/tools/*/TOOL.json`, loaded by
//! [`crate::custom_tools`]) as [`Tool`]s, and running one: its argv, its
//! process (in the session's sandbox) through `maia_tools::runner`, whose
//! exit formatter tells sandbox denials as for Bash (so a denied tool is
//! offered one run without the sandbox too). A tool that is new or changed
//! since the user confirmed it is asked in every mode until confirmed
//! ("always allow").

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use maia_llm::{ToolCall, ToolSpec};
use maia_tools::runner::{self, Outcome};
use maia_tools::sandbox::Sandbox;
use maia_tools::{CappedOutput, ToolKind, ToolOutput, truncate_middle};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::registry::{CallEnv, CallPlan, Ran, Tool, ToolEffect};
use crate::custom_tools::{CustomTool, MAX_OUTPUT_CHARS, RUN_TIMEOUT};
use crate::permission::{Confirm, GateFacts, suggest_rule_value};

pub(crate) struct Custom {
    pub tool: CustomTool,
    /// The session's custom tools not confirmed as they are now.
    pub pending: Arc<Mutex<HashSet<String>>>,
}

#[async_trait::async_trait]
impl Tool for Custom {
    fn spec(&self) -> ToolSpec {
        self.tool.definition()
    }

    /// A program of the user's: it may change anything.
    fn effect(&self) -> ToolEffect {
        ToolEffect::Process
    }

    fn plan(&self, call: &ToolCall, raw: &Value, cwd: &Path) -> Result<CallPlan, String> {
        let name = &self.tool.name;
        let unconfirmed = self.pending.lock().is_ok_and(|p| p.contains(name));
        let facts = GateFacts {
            rule_name: call.name.clone(),
            rule_input: raw.clone(),
            mutating: true,
            suggestion: suggest_rule_value(&call.name, raw, cwd),
            confirm: unconfirmed.then(|| Confirm {
                name: name.clone(),
                fingerprint: self.tool.fingerprint.clone(),
            }),
            action: "run this tool",
            ..GateFacts::default()
        };
        let mut plan = CallPlan::new(name.clone(), facts, raw.clone());
        plan.kind = Some(ToolKind::Execute);
        plan.sandbox_key = Some(format!("{name} {raw}"));
        Ok(plan)
    }

    async fn run(&self, plan: CallPlan, env: &CallEnv<'_>) -> Ran {
        let input: Value = plan.take().unwrap_or(Value::Null);
        run(
            &self.tool,
            &input,
            &env.ctx.cwd,
            &env.ctx.cancel,
            RUN_TIMEOUT,
            env.ctx.sandbox.as_deref(),
        )
        .await
        .into()
    }

    fn confirmed(&self) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(&self.tool.name);
        }
    }
}

/// Longest stderr kept in an error, in characters.
const MAX_STDERR_CHARS: usize = 10_000;

/// The program to start for `argv[0]`: a relative path with a `/`
/// (`./x.sh`, `bin/x`) is in the tool's folder; a bare name is looked up
/// in `PATH`.
fn program(tool: &CustomTool, first: &str) -> PathBuf {
    let path = Path::new(first);
    if path.is_relative() && first.contains('/') {
        tool.dir.join(first.strip_prefix("./").unwrap_or(first))
    } else {
        path.to_path_buf()
    }
}

/// Runs `tool` for `input` with `cwd` as the session's working folder.
/// Never panics; problems are error outputs for the model.
async fn run(
    tool: &CustomTool,
    input: &Value,
    cwd: &Path,
    cancel: &CancellationToken,
    timeout: Duration,
    sandbox: Option<&Sandbox>,
) -> ToolOutput {
    let argv = match tool.argv(input) {
        Ok(argv) => argv,
        Err(e) => return ToolOutput::error(e),
    };
    if cancel.is_cancelled() {
        return ToolOutput::cancelled();
    }
    let Some((first, args)) = argv.split_first() else {
        return ToolOutput::error(format!("{}: `command.run` is empty", tool.name));
    };
    let program = program(tool, first);
    let mut child = match spawn(&program, args, &tool.dir, cwd, sandbox).await {
        Ok(child) => child,
        Err(e) => {
            return ToolOutput::error(format!(
                "Could not start `{first}` for the tool {}: {e}",
                tool.name
            ));
        }
    };
    tracing::debug!(tool = %tool.name, ?argv, pid = ?child.id(), "custom tool started");
    let mut pipes: Vec<Box<dyn tokio::io::AsyncRead + Unpin + Send>> = Vec::new();
    if let Some(out) = child.stdout.take() {
        pipes.push(Box::new(out));
    }
    if let Some(err) = child.stderr.take() {
        pipes.push(Box::new(err));
    }
    let finished = runner::run(child, pipes, timeout, cancel, None, None).await;
    let mut outputs = finished.outputs.into_iter();
    let stdout = outputs.next().unwrap_or_default();
    let stderr = outputs.next().unwrap_or_default();
    let out = stdout.finish(MAX_OUTPUT_CHARS);
    match finished.outcome {
        Outcome::Cancelled => ToolOutput::cancelled(),
        Outcome::Exited(status) if status.success() => {
            if out.is_empty() {
                ToolOutput::ok("(no output)")
            } else {
                ToolOutput::ok(out)
            }
        }
        Outcome::Exited(status) => {
            let (code, killed) = runner::exit_code(status);
            let mut text = sections(stderr, &out);
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            runner::exit_output(sandbox, &text, code, killed)
        }
        Outcome::TimedOut => {
            let what = format!(
                "The tool {} timed out after {} s and was killed.",
                tool.name,
                timeout.as_secs_f64()
            );
            ToolOutput::error(with_sections(what, stderr, &out))
        }
        Outcome::WaitFailed(err) => {
            let what = format!("Waiting for the tool {} failed: {err}", tool.name);
            ToolOutput::error(with_sections(what, stderr, &out))
        }
    }
}

/// stderr, then stdout, each under its heading, within
/// [`MAX_OUTPUT_CHARS`] (empty when both are blank).
fn sections(stderr: CappedOutput, stdout: &str) -> String {
    let mut text = String::new();
    let stderr = stderr.finish(MAX_STDERR_CHARS);
    if !stderr.trim().is_empty() {
        text.push_str("stderr:\n");
        text.push_str(stderr.trim_end());
    }
    if !stdout.trim().is_empty() {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str("stdout:\n");
        let room = MAX_OUTPUT_CHARS.saturating_sub(text.chars().count() + 30);
        text.push_str(truncate_middle(stdout, room).trim_end());
    }
    text
}

/// `headline`, then the [`sections`].
fn with_sections(headline: String, stderr: CappedOutput, stdout: &str) -> String {
    let body = sections(stderr, stdout);
    if body.is_empty() {
        headline
    } else {
        format!("{headline}\n\n{body}")
    }
}

/// Starts the program, retrying briefly when the file is being written
/// (`ETXTBSY`, e.g. a script saved just before).
async fn spawn(
    program: &Path,
    args: &[String],
    dir: &Path,
    session_cwd: &Path,
    sandbox: Option<&Sandbox>,
) -> std::io::Result<tokio::process::Child> {
    maia_tools::process::ensure_runnable(program.as_os_str(), Some(dir))?;
    let mut attempts = 0;
    loop {
        let mut command = maia_tools::process::command(program);
        command
            .args(args)
            .current_dir(dir)
            .env("MAIA_CWD", session_cwd)
            .env("MAIA_TOOL_DIR", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(sandbox) = sandbox {
            sandbox
                .attach(&mut command)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        match command.spawn() {
            Err(e)
                if e.raw_os_error() == Some(nix::errno::Errno::ETXTBSY as i32) && attempts < 10 =>
            {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use serde_json::json;

    use super::*;
    use crate::custom_tools::{load, root};

    fn write_script(cwd: &Path, folder: &str, file: &str, text: &str) {
        let path = root(cwd).join(folder).join(file);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// A single valid tool made from `run` and `parameters`.
    fn tool(cwd: &Path, run: &str, parameters: Value) -> CustomTool {
        let dir = root(cwd).join("t");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("TOOL.json"),
            json!({"description": "test", "command": {"parameters": parameters, "run": run}})
                .to_string(),
        )
        .unwrap();
        let loaded = load(cwd, &crate::tools::reserved_tool_names());
        assert_eq!(loaded.warnings, Vec::<String>::new());
        loaded.tools.into_iter().next().unwrap()
    }

    async fn go(t: &CustomTool, input: &Value, cwd: &Path) -> ToolOutput {
        run(t, input, cwd, &CancellationToken::new(), RUN_TIMEOUT, None).await
    }

    #[tokio::test]
    async fn injection_attempts_arrive_verbatim_as_one_argument() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(
            cwd,
            r#"./args.sh {{p}} "fixed two" pre-{{p}}-post"#,
            json!({"p": {"type": "string"}}),
        );
        write_script(
            cwd,
            "t",
            "args.sh",
            "#!/bin/sh\necho \"$#\"\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n",
        );
        let payload = "; rm -rf / $(touch pwned) `touch pwned2` && touch pwned3 | cat > pwned4 *";
        let out = go(&t, &json!({"p": payload}), cwd).await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(
            out.content,
            format!("3\n[{payload}]\n[fixed two]\n[pre-{payload}-post]\n")
        );
        for place in [
            cwd.to_path_buf(),
            t.dir.clone(),
            std::env::current_dir().unwrap(),
        ] {
            for f in ["pwned", "pwned2", "pwned3", "pwned4"] {
                assert!(
                    !place.join(f).exists(),
                    "{} created",
                    place.join(f).display()
                );
            }
        }
        // A value that looks like an option or a newline-separated command
        // is one argument too.
        let out = go(&t, &json!({"p": "--help\nrm -rf /"}), cwd).await;
        assert_eq!(
            out.content,
            "3\n[--help\nrm -rf /]\n[fixed two]\n[pre---help\nrm -rf /-post]\n"
        );
    }

    #[tokio::test]
    async fn program_on_path_with_script_argument() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "sh ./count.sh {{p}}", json!({"p": {"type": "string"}}));
        write_script(cwd, "t", "count.sh", "echo \"$# [$1]\"\n");
        let out = go(&t, &json!({"p": "a b $(id)"}), cwd).await;
        assert_eq!(out, ToolOutput::ok("1 [a b $(id)]\n"));
    }

    #[tokio::test]
    async fn environment_and_working_directory() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "./env.sh", json!({}));
        write_script(
            cwd,
            "t",
            "env.sh",
            "#!/bin/sh\necho \"cwd=$MAIA_CWD\"\necho \"dir=$MAIA_TOOL_DIR\"\necho \"pwd=$(pwd)\"\nread x && echo \"stdin=$x\" || echo no-stdin\n",
        );
        let out = go(&t, &json!({}), cwd).await;
        assert!(!out.is_error, "{}", out.content);
        let tool_dir = t.dir.display();
        let pwd = t.dir.canonicalize().unwrap();
        assert_eq!(
            out.content,
            format!(
                "cwd={}\ndir={tool_dir}\npwd={}\nno-stdin\n",
                cwd.display(),
                pwd.display()
            )
        );
    }

    #[tokio::test]
    async fn non_zero_exit_is_an_error_with_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "./fail.sh", json!({}));
        write_script(
            cwd,
            "t",
            "fail.sh",
            "#!/bin/sh\necho partial output\necho 'something broke' >&2\nexit 3\n",
        );
        let out = go(&t, &json!({}), cwd).await;
        assert!(out.is_error);
        assert_eq!(
            out.content,
            "stderr:\nsomething broke\n\nstdout:\npartial output\n\nExit code: 3"
        );
        // Success: stdout only, stderr left out.
        write_script(
            cwd,
            "t",
            "fail.sh",
            "#!/bin/sh\necho fine\necho noise >&2\n",
        );
        let out = go(&t, &json!({}), cwd).await;
        assert_eq!(out, ToolOutput::ok("fine\n"));
    }

    #[tokio::test]
    async fn empty_output_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "true", json!({}));
        let out = go(&t, &json!({}), cwd).await;
        assert_eq!(out, ToolOutput::ok("(no output)"));
        let t = tool(cwd, "false", json!({}));
        let out = go(&t, &json!({}), cwd).await;
        assert_eq!(out, ToolOutput::error("Exit code: 1"));
    }

    #[tokio::test]
    async fn invalid_input_and_missing_program_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "./missing.sh {{n}}", json!({"n": {"type": "number"}}));
        let out = go(&t, &json!({"n": "x"}), cwd).await;
        assert!(
            out.is_error && out.content.contains("must be a number"),
            "{}",
            out.content
        );
        let out = go(&t, &json!({"n": 1}), cwd).await;
        assert!(
            out.is_error && out.content.contains("Could not start `./missing.sh`"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn huge_output_truncated_in_the_middle() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "seq 1 {{n}}", json!({"n": {"type": "number"}}));
        for n in [200_000, 20_000] {
            let out = go(&t, &json!({"n": n}), cwd).await;
            assert!(!out.is_error);
            assert!(out.content.starts_with("1\n2\n3\n"));
            assert!(out.content.ends_with(&format!("{}\n{n}\n", n - 1)));
            assert!(out.content.contains("characters truncated"));
            assert!(out.content.chars().count() <= MAX_OUTPUT_CHARS);
        }
    }
}
