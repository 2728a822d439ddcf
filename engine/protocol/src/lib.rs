//! OpenAI and Anthropic wire types.
