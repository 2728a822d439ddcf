"""End-to-end check of `hearth-engine serve` with the official OpenAI Python SDK.

    python3 tests/e2e/openai_client.py BASE_URL API_KEY MODEL
Exits non-zero with a message on the first failed check.
"""
import sys

import openai

base, key, model = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base, api_key=key)

models = [m.id for m in client.models.list().data]
assert models == [model], models

messages = [{"role": "user", "content": "What is the capital of France?"}]
r = client.chat.completions.create(model=model, messages=messages, max_tokens=24)
content = r.choices[0].message.content
assert "Paris" in content, content
assert r.choices[0].finish_reason == "stop", r.choices[0].finish_reason
assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0, r.usage
print("chat:", repr(content))

streamed, usage, finish = "", None, None
for chunk in client.chat.completions.create(
    model=model, messages=messages, max_tokens=24, stream=True,
    stream_options={"include_usage": True},
):
    if chunk.usage:
        usage = chunk.usage
    for c in chunk.choices:
        streamed += c.delta.content or ""
        finish = c.finish_reason or finish
assert streamed == content, (streamed, content)
assert finish == "stop" and usage and usage.completion_tokens == r.usage.completion_tokens
# The second identical request finds the prompt's full blocks in the prefix cache.
assert usage.prompt_tokens_details.cached_tokens > 0, usage
print("stream: identical, cached prompt tokens:", usage.prompt_tokens_details.cached_tokens)

# /v1/completions reports prefix-cache hits the same way (non-streamed and streamed).
text_prompt = "The history of the printing press begins in the fifteenth century, when " * 4
first = client.completions.create(model=model, prompt=text_prompt, max_tokens=4)
again = client.completions.create(model=model, prompt=text_prompt, max_tokens=4)
assert again.usage.prompt_tokens_details.cached_tokens > 0, again.usage
usage = None
for chunk in client.completions.create(
    model=model, prompt=text_prompt, max_tokens=4, stream=True,
    stream_options={"include_usage": True},
):
    usage = chunk.usage or usage
assert usage and usage.prompt_tokens_details.cached_tokens > 0, usage
print("completions: cached prompt tokens:", again.usage.prompt_tokens_details.cached_tokens)

try:
    client.chat.completions.create(model=model, messages=messages, temperature=7)
    raise AssertionError("temperature 7 was accepted")
except openai.BadRequestError as e:
    assert "temperature" in str(e), e
try:
    openai.OpenAI(base_url=base, api_key="wrong").models.list()
    raise AssertionError("a wrong key was accepted")
except openai.AuthenticationError:
    pass
print("errors: 400 and 401 as expected")
print("openai sdk: all checks passed")
