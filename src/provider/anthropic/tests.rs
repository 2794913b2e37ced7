use serde_json::{Value, json};

use super::request::body;
use crate::execution::{
    ContentPart, ErrorClass, ExecutionInput, GenerationParameters, Image, Message, Reasoning,
    ResponseFormat, ResponseFormatKind, Role, ToolCall, ToolDefinition,
};

fn message(role: Role, parts: &[&str]) -> Message {
    Message {
        role,
        content: parts
            .iter()
            .map(|t| ContentPart::Text((*t).into()))
            .collect(),
        tool_calls: Vec::new(),
        tool_call_id: None,
    }
}

fn tool_result(id: &str, text: &str) -> Message {
    let mut m = message(Role::Tool, &[text]);
    m.tool_call_id = Some(id.into());
    m
}

fn encode(input: &ExecutionInput) -> Value {
    serde_json::from_slice(&body("claude-sonnet-4-5", input, 4096).unwrap()).unwrap()
}

#[test]
fn maps_a_whole_conversation() {
    let mut assistant = message(Role::Assistant, &["checking both"]);
    for (id, city) in [("toolu_1", "Paris"), ("toolu_2", "Rome")] {
        assistant.tool_calls.push(ToolCall {
            id: id.into(),
            name: "get_weather".into(),
            arguments_json: format!(r#"{{"city":"{city}"}}"#),
        });
    }
    let mut user = message(Role::User, &["and this?"]);
    user.content.push(ContentPart::Image(Image {
        data: vec![1, 2, 3],
        media_type: "image/png".into(),
        ..Default::default()
    }));
    let input = ExecutionInput {
        messages: vec![
            message(Role::System, &["be brief"]),
            message(Role::User, &["weather in Paris and Rome?"]),
            assistant,
            tool_result("toolu_1", "18C"),
            tool_result("toolu_2", "21C"),
            user,
        ],
        tools: vec![
            ToolDefinition {
                name: "get_weather".into(),
                description: "Weather by city".into(),
                parameters_json_schema:
                    r#"{"type":"object","properties":{"city":{"type":"string"}}}"#.into(),
            },
            ToolDefinition {
                name: "now".into(),
                description: String::new(),
                parameters_json_schema: String::new(),
            },
        ],
        parameters: GenerationParameters {
            temperature: Some(0.5),
            stop_sequences: vec!["END".into()],
            ..Default::default()
        },
    };
    let expected = json!({
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": "be brief"}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "weather in Paris and Rome?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "checking both"},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}},
            ]},
            // Both results and the next user message share one user turn.
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18C"}]},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "21C"}]},
                {"type": "text", "text": "and this?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AQID"}},
            ]},
        ],
        "tools": [
            {"name": "get_weather", "description": "Weather by city",
             "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
            {"name": "now", "input_schema": {"type": "object"}},
        ],
        "max_tokens": 4096,
        "temperature": 0.5,
        "stop_sequences": ["END"],
        "stream": true,
    });
    assert_eq!(encode(&input), expected);
}

#[test]
fn tool_results_come_first_in_a_merged_user_turn() {
    let mut assistant = message(Role::Assistant, &[]);
    for id in ["toolu_1", "toolu_2"] {
        assistant.tool_calls.push(ToolCall {
            id: id.into(),
            name: "now".into(),
            arguments_json: "{}".into(),
        });
    }
    let input = ExecutionInput {
        messages: vec![
            message(Role::User, &["what time is it?"]),
            assistant,
            // A user message between the calls and their results: the turn they share must
            // still open with the results.
            message(Role::User, &["in both zones"]),
            tool_result("toolu_1", "10:00"),
            tool_result("toolu_2", "11:00"),
        ],
        ..Default::default()
    };
    assert_eq!(
        encode(&input)["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "10:00"}]},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "11:00"}]},
            {"type": "text", "text": "in both zones"},
        ]})
    );
}

#[test]
fn input_the_protocol_cannot_express_names_the_field() {
    let mut bad_arguments = message(Role::Assistant, &[]);
    bad_arguments.tool_calls.push(ToolCall {
        id: "t".into(),
        name: "f".into(),
        arguments_json: "[1, 2]".into(),
    });
    let with = |parameters: GenerationParameters| ExecutionInput {
        messages: vec![Message::user("hi")],
        parameters,
        ..Default::default()
    };
    let cases = [
        (
            ExecutionInput {
                messages: vec![Message::user("hi"), message(Role::System, &["late"])],
                ..Default::default()
            },
            "input.messages[1].role: ",
            ErrorClass::Rejected,
        ),
        (
            ExecutionInput {
                messages: vec![Message::user("hi"), bad_arguments],
                ..Default::default()
            },
            "input.messages[1].tool_calls[0].arguments_json: ",
            // Arguments that are not a JSON object: chat completions carries them as text.
            ErrorClass::Rejected,
        ),
        (
            with(GenerationParameters {
                temperature: Some(1.5),
                ..Default::default()
            }),
            "input.parameters.temperature: ",
            ErrorClass::Rejected,
        ),
        (
            with(GenerationParameters {
                response_format: Some(ResponseFormat {
                    kind: ResponseFormatKind::JsonObject,
                    json_schema: String::new(),
                    schema_name: String::new(),
                }),
                ..Default::default()
            }),
            "input.parameters.response_format: ",
            ErrorClass::Rejected,
        ),
    ];
    // What this protocol cannot express another target may take: rejected; what no
    // protocol could: invalid.
    for (input, field, class) in cases {
        let error = body("m", &input, 16).unwrap_err();
        assert_eq!(
            (error.class, error.code.as_str()),
            (class, "invalid_request"),
            "{field}"
        );
        assert!(error.message.starts_with(field), "{}", error.message);
    }
}

#[test]
fn the_callers_limit_wins_over_the_default() {
    let input = ExecutionInput {
        messages: vec![Message::user("hi")],
        parameters: GenerationParameters {
            max_output_tokens: Some(12),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(encode(&input)["max_tokens"], 12);
}

#[test]
fn signed_thinking_goes_back_first_and_unsigned_reasoning_is_left_out() {
    let mut assistant = message(Role::Assistant, &["Four."]);
    let reasoning = |text: &str, signature: &str, redacted: &str| {
        ContentPart::Reasoning(Reasoning {
            text: text.into(),
            signature: signature.into(),
            redacted: redacted.into(),
        })
    };
    // As a caller might send them: after the text, and one from another provider unsigned.
    assistant.content.extend([
        reasoning("Two and two.", "sig", ""),
        reasoning("", "", "opaque"),
        reasoning("from a chat completions model", "", ""),
    ]);
    let input = ExecutionInput {
        messages: vec![Message::user("2+2?"), assistant],
        parameters: GenerationParameters {
            reasoning_budget_tokens: Some(2048),
            ..Default::default()
        },
        ..Default::default()
    };
    let sent = encode(&input);
    assert_eq!(
        sent["messages"][1]["content"],
        json!([
            {"type": "thinking", "thinking": "Two and two.", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Four."},
        ])
    );
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    // No max_output_tokens: room for the answer beyond the budget.
    assert_eq!(sent["max_tokens"], 4096 + 2048);
}
