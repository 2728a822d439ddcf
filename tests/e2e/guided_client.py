"""End-to-end check of guided decoding on `hearth-engine serve` (SmolLM2-135M, spec with
tool_call_parser: hermes) through the official OpenAI and Anthropic Python SDKs.

    python3 tests/e2e/guided_client.py BASE_URL MODEL
The tiny model would not answer these on its own; the grammar makes every answer valid.
Exits non-zero with a message on the first failed check.
"""
import json
import sys
from typing import List, Optional

import anthropic
import jsonschema
import openai
import pydantic

base, model = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base + "/v1", api_key="unused")
ask = [{"role": "user", "content": "Give me a city as JSON."}]

# response_format json_schema: the content parses and validates (jsonschema as the oracle).
schema = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 40},
        "population": {"type": "integer"},
        "coastal": {"type": "boolean"},
        "districts": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3},
        "mayor": {"anyOf": [{"type": "string", "maxLength": 30}, {"type": "null"}]},
    },
    "required": ["city", "population", "coastal"],
    "additionalProperties": False,
}
for temperature in (0.0, 1.0):
    r = client.chat.completions.create(
        model=model, messages=ask, max_tokens=160, temperature=temperature, n=2, seed=11,
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}},
    )
    for c in r.choices:
        assert c.finish_reason == "stop", (c.finish_reason, c.message.content)
        jsonschema.validate(json.loads(c.message.content), schema)
        print(f"json_schema (temperature {temperature}):", c.message.content)


# The SDK's structured-output helper: a pydantic model in, a parsed object out.
class City(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=30)
    rank: int
    neighbours: List[str] = pydantic.Field(max_length=2)
    nickname: Optional[str] = pydantic.Field(max_length=20)


parse = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
r = parse(model=model, messages=ask, max_tokens=200, response_format=City)
city = r.choices[0].message.parsed
assert isinstance(city, City), r.choices[0].message
print("pydantic parse:", city)

# JSON mode.
r = client.chat.completions.create(
    model=model, messages=ask, max_tokens=120, response_format={"type": "json_object"}
)
c = r.choices[0]
if c.finish_reason == "stop":
    assert isinstance(json.loads(c.message.content), dict), c.message.content
else:
    assert c.finish_reason == "length" and c.message.content.startswith("{"), c
print("json_object:", c.finish_reason, c.message.content[:80])

tools = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 30},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Local time",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string", "maxLength": 20}},
            "required": ["tz"]}}},
]
weather = [{"role": "user", "content": "What's the weather in Paris?"}]

# Named function: exactly that call, arguments that parse and fit its schema.
r = client.chat.completions.create(
    model=model, messages=weather, tools=tools, max_tokens=80,
    tool_choice={"type": "function", "function": {"name": "get_weather"}},
)
c = r.choices[0]
assert c.finish_reason == "tool_calls", c
assert [t.function.name for t in c.message.tool_calls] == ["get_weather"], c.message
args = json.loads(c.message.tool_calls[0].function.arguments)
jsonschema.validate(args, tools[0]["function"]["parameters"])
print("named tool_choice:", c.message.tool_calls[0].function.name, args)

# Required: some call of some tool, streamed.
names, finish = [], None
for chunk in client.chat.completions.create(
    model=model, messages=weather, tools=tools, max_tokens=80, tool_choice="required",
    parallel_tool_calls=False, stream=True,
):
    for ch in chunk.choices:
        for t in ch.delta.tool_calls or []:
            names.append(t.function.name)
            json.loads(t.function.arguments)
        finish = ch.finish_reason or finish
assert len(names) == 1 and names[0] in ("get_weather", "get_time") and finish == "tool_calls", (names, finish)
print("required tool_choice (stream):", names)

# Unsupported schema keyword: a 400 naming it.
try:
    client.chat.completions.create(
        model=model, messages=ask, max_tokens=8,
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "^a$"}}},
    )
    raise AssertionError("an unsupported keyword was accepted")
except openai.BadRequestError as e:
    assert "pattern" in str(e), e
print("unsupported keyword: 400")

# Anthropic: tool_choice {"type": "tool"} gives a tool_use block of that tool.
a = anthropic.Anthropic(base_url=base, api_key="unused")
m = a.messages.create(
    model=model, max_tokens=80, messages=weather,
    tools=[{"name": t["function"]["name"], "description": t["function"]["description"],
            "input_schema": t["function"]["parameters"]} for t in tools],
    tool_choice={"type": "tool", "name": "get_time"},
)
uses = [b for b in m.content if b.type == "tool_use"]
assert m.stop_reason == "tool_use" and [u.name for u in uses] == ["get_time"], m
assert isinstance(uses[0].input.get("tz"), str), uses[0].input
print("anthropic tool_choice tool:", uses[0].name, uses[0].input)
print("guided decoding: all checks passed")
