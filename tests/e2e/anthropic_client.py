"""End-to-end check of `hearth-engine serve` with the official Anthropic Python SDK.

    python3 tests/e2e/anthropic_client.py BASE_URL API_KEY MODEL
"""
import sys

import anthropic

base, key, model = sys.argv[1], sys.argv[2], sys.argv[3]
client = anthropic.Anthropic(base_url=base, api_key=key)
messages = [{"role": "user", "content": "What is the capital of France?"}]
# Current SDKs no longer have sampling arguments; greedy goes through extra_body.
greedy = {"temperature": 0}

r = client.messages.create(model=model, max_tokens=24, messages=messages, extra_body=greedy)
text = "".join(b.text for b in r.content if b.type == "text")
assert "Paris" in text, text
assert r.stop_reason == "end_turn", r.stop_reason
print("messages:", repr(text), r.usage)

with client.messages.stream(model=model, max_tokens=24, messages=messages, extra_body=greedy) as s:
    streamed = "".join(s.text_stream)
    final = s.get_final_message()
assert streamed == text, (streamed, text)
assert final.stop_reason == "end_turn" and final.usage.output_tokens == r.usage.output_tokens
print("stream: identical")

n = client.messages.count_tokens(model=model, messages=messages).input_tokens
assert n > 0, n
try:
    client.messages.create(model=model, max_tokens=8, messages=messages, extra_body={"temperature": 3})
    raise AssertionError("temperature 3 was accepted")
except anthropic.BadRequestError as e:
    assert "temperature" in str(e), e
print("anthropic sdk: all checks passed")
