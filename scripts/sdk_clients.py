#!/usr/bin/env python3
"""OpenAI's and Anthropic's Python SDKs, as they come, against the runtime's HTTP ingress
(scripts/sdk_check.sh serves it with scripts/sdk_config.toml): chat completions, responses and
messages,
whole and streamed, a fallback the caller never sees, an answer cut after output that the SDK
raises instead of returning, tools, the refusals as the SDK's own exceptions, and a retry under
one Idempotency-Key attaching to the first execution.

    pip install openai anthropic
    python3 scripts/sdk_clients.py http://127.0.0.1:8080/v1
"""
import sys

import anthropic
import openai


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        raise SystemExit(1)


def main() -> int:
    base = sys.argv[1]
    client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0)
    user = [{"role": "user", "content": "hello from the sdk"}]

    ids = [m.id for m in client.models.list()]
    check("the models are the abilities", "chat" in ids and "chat/fallback" in ids)

    whole = client.chat.completions.create(model="chat", messages=user)
    check("a whole answer", whole.choices[0].message.content == "hello from the sdk")
    check("the resolved target is the model", whole.model == "scripted/echo")
    check("the execution id is the request id", whole._request_id == whole.id)
    check("usage", whole.usage.completion_tokens == 4)

    stream = client.chat.completions.create(
        model="chat/fallback", messages=user, stream=True, stream_options={"include_usage": True}
    )
    text, usage, models = "", None, set()
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
            models.add(chunk.model)
        if chunk.usage:
            usage = chunk.usage
    check("a streamed answer after a fallback", text == "hello from the sdk")
    check("no chunk of the failed target", models == {"scripted/echo"})
    check("the final usage chunk", usage is not None and usage.total_tokens > 0)

    seen = ""
    try:
        for chunk in client.chat.completions.create(
            model="cut", messages=[{"role": "user", "content": "one two three four"}], stream=True
        ):
            if chunk.choices and chunk.choices[0].delta.content:
                seen += chunk.choices[0].delta.content
        check("a stream cut after output raises", False)
    except openai.APIError as e:
        check("a stream cut after output raises, after its output", seen == "one two " and "output_interrupted" in str(e.body or e))

    rescued = client.chat.completions.create(
        model="cut", messages=[{"role": "user", "content": "one two three four"}]
    )
    check("a whole answer falls back past the cut", rescued.choices[0].message.content == "one two three four")

    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    called = client.chat.completions.create(model="tools", messages=user, tools=tools)
    call = called.choices[0].message.tool_calls[0]
    check("a tool call", call.function.name == "get_weather" and '"Paris"' in call.function.arguments)
    check("finish_reason tool_calls", called.choices[0].finish_reason == "tool_calls")

    try:
        client.chat.completions.create(model="nope", messages=user)
        check("an unknown model is refused", False)
    except openai.NotFoundError as e:
        check("an unknown model is a 404", e.status_code == 404)
    try:
        client.chat.completions.create(model="chat", messages=user, n=3)
        check("n=3 is refused", False)
    except openai.BadRequestError as e:
        check("n=3 is a 400 naming n", e.body.get("param") == "n")

    key = {"Idempotency-Key": "sdk-retry-1"}
    first = client.chat.completions.create(model="chat", messages=user, extra_headers=key)
    again = client.chat.completions.create(model="chat", messages=user, extra_headers=key)
    check("a retry under one key attaches", first.id == again.id)
    try:
        client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": "else"}], extra_headers=key
        )
        check("a different body under the key is refused", False)
    except openai.UnprocessableEntityError as e:
        check("a different body under the key is a 422", e.status_code == 422)
    responses_api(client)
    return anthropic_sdk(base.removesuffix("/v1"))


def responses_api(client):
    whole = client.responses.create(model="chat", input="hello from the sdk")
    check("responses: a whole response", whole.output_text == "hello from the sdk")
    check("responses: the resolved target", whole.model == "scripted/echo" and whole.usage.output_tokens == 4)

    with client.responses.stream(model="chat/fallback", input="hello from the sdk") as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    check("responses: a streamed response after a fallback", text == "hello from the sdk")
    check("responses: the final response", final.status == "completed" and final.output_text == text)

    seen = ""
    try:
        for event in client.responses.create(model="cut", input="one two three four", stream=True):
            if event.type == "response.output_text.delta":
                seen += event.delta
        check("responses: a stream cut after output raises", False)
    except openai.APIError:
        check("responses: a stream cut after output raises, after its output", seen == "one two ")

    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    called = client.responses.create(model="tools", input="weather?", tools=tools)
    call = called.output[0]
    check("responses: a function call", call.type == "function_call" and '"Paris"' in call.arguments)


def anthropic_sdk(base) -> int:
    client = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0)
    user = [{"role": "user", "content": "hello from the sdk"}]

    ids = [m.id for m in client.models.list()]
    check("anthropic: the models are the abilities", "chat" in ids and "tools" in ids)

    whole = client.messages.create(model="chat", max_tokens=64, messages=user)
    check("anthropic: a whole message", whole.content[0].text == "hello from the sdk")
    check("anthropic: the resolved target is the model", whole.model == "scripted/echo")
    check("anthropic: end_turn and usage", whole.stop_reason == "end_turn" and whole.usage.output_tokens == 4)

    with client.messages.stream(model="chat/fallback", max_tokens=64, messages=user) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    check("anthropic: a streamed message after a fallback", text == "hello from the sdk")
    check("anthropic: the final message", final.stop_reason == "end_turn" and final.model == "scripted/echo")

    seen = ""
    try:
        with client.messages.stream(
            model="cut", max_tokens=64, messages=[{"role": "user", "content": "one two three four"}]
        ) as stream:
            for piece in stream.text_stream:
                seen += piece
        check("anthropic: a stream cut after output raises", False)
    except anthropic.APIError:
        check("anthropic: a stream cut after output raises, after its output", seen == "one two ")

    tools = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    called = client.messages.create(model="tools", max_tokens=64, messages=user, tools=tools)
    block = called.content[0]
    check("anthropic: a tool use", block.type == "tool_use" and block.input == {"city": "Paris"})
    answered = client.messages.create(
        model="chat",
        max_tokens=64,
        tools=tools,
        messages=user
        + [
            {"role": "assistant", "content": called.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id, "content": "sunny"}, {"type": "text", "text": "and so?"}]},
        ],
    )
    check("anthropic: a tool result goes back", answered.content[0].text == "and so?")

    try:
        client.messages.create(model="nope", max_tokens=64, messages=user)
        check("anthropic: an unknown model is refused", False)
    except anthropic.NotFoundError as e:
        check("anthropic: an unknown model is a 404", e.status_code == 404)
    return 0


if __name__ == "__main__":
    sys.exit(main())
