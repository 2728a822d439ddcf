//! `GET /v1/models`: the served model(s).

use serde::{Deserialize, Serialize};

use crate::tag::{ListObject, ModelObject};

/// Body of `GET /v1/models`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelList {
    pub object: ListObject,
    pub data: Vec<ModelCard>,
}

/// One served model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCard {
    /// The name clients put in `model`.
    pub id: String,
    pub object: ModelObject,
    /// Unix seconds.
    pub created: u64,
    pub owned_by: String,
    /// vLLM extra: the context length the server was started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<u32>,
}

impl ModelList {
    /// A list of the given cards.
    pub fn new(data: Vec<ModelCard>) -> Self {
        Self {
            object: ListObject,
            data,
        }
    }
}
