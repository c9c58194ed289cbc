//! The attribute names and fixed values of the OpenTelemetry GenAI
//! semantic conventions MAIA uses (checked by the tests against the
//! conventions' registry), and MAIA's own, under `maia.`.

pub(crate) const OPERATION_NAME: &str = "gen_ai.operation.name";
pub(crate) const PROVIDER_NAME: &str = "gen_ai.provider.name";
pub(crate) const REQUEST_MODEL: &str = "gen_ai.request.model";
pub(crate) const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
pub(crate) const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub(crate) const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub(crate) const CONVERSATION_ID: &str = "gen_ai.conversation.id";
pub(crate) const AGENT_NAME: &str = "gen_ai.agent.name";
pub(crate) const AGENT_ID: &str = "gen_ai.agent.id";
pub(crate) const TOOL_NAME: &str = "gen_ai.tool.name";
pub(crate) const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
pub(crate) const TOOL_TYPE: &str = "gen_ai.tool.type";
pub(crate) const TOOL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
pub(crate) const TOOL_RESULT: &str = "gen_ai.tool.call.result";
pub(crate) const INPUT_MESSAGES: &str = "gen_ai.input.messages";
pub(crate) const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
pub(crate) const TOKEN_TYPE: &str = "gen_ai.token.type";
pub(crate) const ERROR_TYPE: &str = "error.type";

/// `gen_ai.provider.name`: MAIA speaks the OpenAI chat API (to a LiteLLM
/// proxy or any compatible server).
pub(crate) const PROVIDER: &str = "openai";
/// `gen_ai.agent.name` of a turn's span.
pub(crate) const AGENT: &str = "maia";
