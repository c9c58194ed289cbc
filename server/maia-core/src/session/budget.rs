//! The budget's gate before each model request ([`Session::budget_gate`]):
//! the request estimated with the prices of the model it goes to, checked
//! against the session's [`crate::budget::Spend`], and, when it would pass
//! a limit, a question to the user ("raise by …" or "stop"), asked as a
//! permission question on a card of its own so every front door can put
//! it.

use std::ops::ControlFlow;

use maia_llm::ChatRequest;
use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::budget::{self, Over, Verdict};
use crate::event::{
    ChoiceKind, Event, NoticeLevel, PermissionChoice, PermissionReply, PermissionRequest,
    StopReason, ToolCallPatch, ToolCallView, ToolContent, ToolStatus, Unfinished,
};
use crate::meter::RequestSize;
use crate::session::Session;

impl Session {
    /// A top session's turn starts: its turn spend and limit start again.
    pub(crate) fn begin_turn_budget(&self) {
        if self.role.is_none()
            && let Ok(mut spend) = self.budget.lock()
        {
            spend.begin_turn();
        }
    }

    /// Whether `request` may be sent: within the budget, or the user
    /// raised it; `Break` when the user stopped (or the turn was
    /// cancelled while asking).
    pub(crate) async fn budget_gate(
        &mut self,
        request: &ChatRequest,
        size: RequestSize,
        cancel: &CancellationToken,
    ) -> ControlFlow<StopReason> {
        if self.budget.lock().map_or(true, |s| s.limits_empty()) {
            return ControlFlow::Continue(());
        }
        let estimate = self.estimate(request, size, cancel).await;
        loop {
            let verdict = match self.budget.lock() {
                Ok(mut spend) => spend.check(&request.model, estimate),
                Err(_) => return ControlFlow::Continue(()),
            };
            let over = match verdict {
                Verdict::Go => return ControlFlow::Continue(()),
                Verdict::Unenforceable(text) => {
                    tracing::warn!("{text}");
                    self.emit(Event::Notice {
                        level: NoticeLevel::Warning,
                        text,
                    });
                    return ControlFlow::Continue(());
                }
                Verdict::Over(over) => over,
            };
            match self.ask_budget(&over, cancel).await {
                Some(true) => {
                    tracing::info!(
                        scope = over.scope.name(),
                        by = over.raise_by,
                        "budget raised"
                    );
                    if let Ok(mut spend) = self.budget.lock() {
                        spend.raise(&over);
                    }
                }
                Some(false) => {
                    self.unfinished(Unfinished::Budget, over.stopped());
                    return ControlFlow::Break(StopReason::EndTurn);
                }
                None => return ControlFlow::Break(StopReason::Cancelled),
            }
        }
    }

    /// What `request` may cost: its input tokens (calibrated, images
    /// counted apart) and its reply bound, at the prices of its model
    /// (the `prices` setting, else `/model/info`); `None`: no price known.
    async fn estimate(
        &self,
        request: &ChatRequest,
        size: RequestSize,
        cancel: &CancellationToken,
    ) -> Option<f64> {
        let model = request.model.as_str();
        let prices = match self.project.settings.prices.get(model) {
            Some(prices) => *prices,
            None => {
                let llm = self.project.llm.as_ref().ok()?;
                crate::window::model_info_entry(&self.services.windows, llm, model, cancel)
                    .await?
                    .prices?
            }
        };
        let input = self.meter.calibrated(size.chars) + size.image_tokens;
        let reply = request
            .max_tokens
            .map_or(budget::DEFAULT_REPLY_BOUND, u64::from);
        Some(budget::estimate(&prices, input, reply))
    }

    /// Asks whether to raise the limit `over` would pass: `Some(true)`
    /// raise, `Some(false)` stop, `None` cancelled.
    async fn ask_budget(&self, over: &Over, cancel: &CancellationToken) -> Option<bool> {
        let id = format!("budget-{}", uuid::Uuid::new_v4().simple());
        let view = ToolCallView {
            id: id.clone(),
            name: budget::QUESTION.to_owned(),
            title: over.title(),
            kind: None,
            locations: Vec::new(),
            raw_input: json!({
                "scope": over.scope.name(),
                "limitUsd": over.limit,
                "spentUsd": over.spent,
                "estimateUsd": over.estimate,
                "raiseByUsd": over.raise_by,
            }),
            status: ToolStatus::Pending,
            content: vec![ToolContent::Text { text: over.text() }],
        };
        self.emit(Event::ToolCall(view.clone()));
        let (reply, answered) = oneshot::channel();
        self.emit(Event::Permission(PermissionRequest {
            tool_call: view,
            options: vec![
                PermissionChoice {
                    id: budget::RAISE.to_owned(),
                    label: over.raise_label(),
                    kind: ChoiceKind::AllowOnce,
                },
                PermissionChoice {
                    id: budget::STOP.to_owned(),
                    label: "Stop here".to_owned(),
                    kind: ChoiceKind::RejectOnce,
                },
            ],
            reply,
        }));
        let reply = tokio::select! {
            biased;
            () = cancel.cancelled() => PermissionReply::Cancelled,
            reply = answered => reply.unwrap_or(PermissionReply::Cancelled),
        };
        let raise = match reply {
            PermissionReply::Selected { option, .. } => Some(option == budget::RAISE),
            PermissionReply::Rejected { .. } => Some(false),
            PermissionReply::Cancelled => None,
        };
        let (status, said) = match raise {
            Some(true) => (ToolStatus::Completed, over.raise_label()),
            Some(false) => (ToolStatus::Failed, over.stopped()),
            None => (ToolStatus::Failed, "Cancelled.".to_owned()),
        };
        self.emit(Event::ToolCallUpdate(ToolCallPatch {
            id,
            status: Some(status),
            content: Some(vec![ToolContent::Text { text: said }]),
            raw_output: None,
        }));
        raise
    }
}
