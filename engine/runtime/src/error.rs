//! The runtime error type.

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("the prompt has {prompt} tokens but max_model_len is {max}")]
    PromptTooLong { prompt: usize, max: usize },
    #[error(transparent)]
    Backend(#[from] hearth_backend::BackendError),
    #[error(transparent)]
    Load(#[from] hearth_models::LoadError),
    #[error(transparent)]
    Spec(#[from] hearth_spec::SpecError),
    #[error(transparent)]
    Text(#[from] hearth_text::TextError),
    #[error("{0}")]
    Unsupported(String),
}
