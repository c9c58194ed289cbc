//! `maia-mock-mcp`: the test MCP server (see `maia_test_support::mock_mcp`).
//! Stdio by default; `--http PORT` serves streamable HTTP on 127.0.0.1.

use maia_test_support::mock_mcp::MockMcp;
use rmcp::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if let Ok(path) = std::env::var("MOCK_MCP_PID_FILE") {
        std::fs::write(path, std::process::id().to_string())?;
    }
    if let Ok(message) = std::env::var("MOCK_MCP_FAIL_START") {
        eprintln!("{message}");
        std::process::exit(3);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().position(|a| a == "--http") {
        Some(i) => {
            let port: u16 = args.get(i + 1).map_or(Ok(0), |p| p.parse())?;
            maia_test_support::mock_mcp::serve_http(port).await?;
        }
        None => {
            let service = MockMcp.serve(rmcp::transport::stdio()).await?;
            service.waiting().await?;
        }
    }
    Ok(())
}
