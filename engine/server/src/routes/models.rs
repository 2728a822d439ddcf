//! GET /v1/models: the one served model.

use axum::extract::State;
use axum::Json;
use hearth_protocol::openai::models::{ModelCard, ModelList};

use crate::state::AppState;

pub async fn list(State(s): State<AppState>) -> Json<ModelList> {
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs().saturating_sub(s.started.elapsed().as_secs()))
        .unwrap_or(0);
    Json(ModelList::new(vec![ModelCard {
        id: s.model_name.to_string(),
        object: Default::default(),
        created,
        owned_by: "hearth".into(),
        max_model_len: Some(s.max_model_len as u32),
    }]))
}
