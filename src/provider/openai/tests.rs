use serde_json::{Value, json};

use super::request::body;
use crate::config::MaxTokensField;
use crate::execution::{
    ContentPart, ExecutionInput, GenerationParameters, Image, Message, Reasoning, ResponseFormat,
    ResponseFormatKind, Role, ToolCall, ToolDefinition,
};

fn message(role: Role, parts: Vec<ContentPart>) -> Message {
    Message {
        role,
        content: parts,
        tool_calls: Vec::new(),
        tool_call_id: None,
    }
}

fn text(t: &str) -> ContentPart {
    ContentPart::Text(t.into())
}

fn encode(input: &ExecutionInput, field: MaxTokensField) -> Value {
    serde_json::from_slice(&body("gpt-4o", input, field).unwrap()).unwrap()
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one conversation with every kind of message, and the whole request it maps to"
)]
fn maps_a_whole_conversation() {
    let mut assistant = message(Role::Assistant, vec![]);
    assistant.tool_calls.push(ToolCall {
        id: "call_1".into(),
        name: "get_weather".into(),
        arguments_json: r#"{"city":"Paris"}"#.into(),
    });
    let mut tool = message(Role::Tool, vec![text("18C")]);
    tool.tool_call_id = Some("call_1".into());
    let input = ExecutionInput {
        messages: vec![
            message(Role::System, vec![text("be brief")]),
            message(
                Role::User,
                vec![
                    text("what is this?"),
                    ContentPart::Image(Image {
                        url: "https://example.com/a.png".into(),
                        ..Default::default()
                    }),
                    ContentPart::Image(Image {
                        data: vec![1, 2, 3],
                        media_type: "image/png".into(),
                        ..Default::default()
                    }),
                ],
            ),
            assistant,
            tool,
        ],
        tools: vec![ToolDefinition {
            name: "get_weather".into(),
            description: "Weather by city".into(),
            parameters_json_schema: r#"{"type":"object","properties":{"city":{"type":"string"}}}"#
                .into(),
        }],
        parameters: GenerationParameters {
            max_output_tokens: Some(64),
            temperature: Some(0.7),
            top_p: Some(0.9),
            stop_sequences: vec!["END".into()],
            response_format: Some(ResponseFormat {
                kind: ResponseFormatKind::JsonSchema,
                json_schema: r#"{"type":"object"}"#.into(),
                schema_name: String::new(),
            }),
            reasoning_budget_tokens: None,
        },
    };
    let expected = json!({
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AQID"}},
            ]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
            ]},
            {"role": "tool", "content": "18C", "tool_call_id": "call_1"},
        ],
        "tools": [{"type": "function", "function": {
            "name": "get_weather",
            "description": "Weather by city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }}],
        "max_completion_tokens": 64,
        "temperature": 0.7,
        "top_p": 0.9,
        "stop": ["END"],
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "response", "schema": {"type": "object"}}},
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    assert_eq!(
        encode(&input, MaxTokensField::MaxCompletionTokens),
        expected
    );
}

#[test]
fn the_token_limit_field_is_configurable_and_json_object_mode_maps() {
    let input = ExecutionInput {
        messages: vec![Message::user("hi")],
        parameters: GenerationParameters {
            max_output_tokens: Some(5),
            response_format: Some(ResponseFormat {
                kind: ResponseFormatKind::JsonObject,
                json_schema: String::new(),
                schema_name: String::new(),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let body = encode(&input, MaxTokensField::MaxTokens);
    assert_eq!(body["max_tokens"], 5);
    assert!(body.get("max_completion_tokens").is_none());
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
}

#[test]
fn input_the_protocol_cannot_express_names_the_field() {
    let image = |media_type: &str| {
        ContentPart::Image(Image {
            data: vec![0],
            media_type: media_type.into(),
            ..Default::default()
        })
    };
    let cases = [
        (
            vec![
                Message::user("hi"),
                message(Role::System, vec![text("a"), image("image/png")]),
            ],
            "input.messages[1].content[1]: ",
            crate::execution::ErrorClass::Rejected,
        ),
        (
            vec![message(Role::User, vec![text("a"), image("")])],
            "input.messages[0].content[1].image.media_type: ",
            crate::execution::ErrorClass::Invalid,
        ),
    ];
    for (messages, field, class) in cases {
        let input = ExecutionInput {
            messages,
            ..Default::default()
        };
        let error = body("m", &input, MaxTokensField::MaxCompletionTokens).unwrap_err();
        assert_eq!(error.code.as_str(), "invalid_request");
        assert_eq!(error.class, class, "{field}");
        assert!(error.message.starts_with(field), "{}", error.message);
    }
}

#[test]
fn reasoning_sent_back_is_left_out_and_a_reasoning_budget_is_rejected() {
    let assistant = message(
        Role::Assistant,
        vec![
            ContentPart::Reasoning(Reasoning {
                text: "thinking".into(),
                ..Reasoning::default()
            }),
            ContentPart::Text("4".into()),
        ],
    );
    let input = ExecutionInput {
        messages: vec![Message::user("2+2?"), assistant, Message::user("and 3+3?")],
        ..Default::default()
    };
    let sent = encode(&input, MaxTokensField::MaxCompletionTokens);
    assert_eq!(
        sent["messages"][1],
        json!({"role": "assistant", "content": "4"})
    );
    let budgeted = ExecutionInput {
        parameters: GenerationParameters {
            reasoning_budget_tokens: Some(1024),
            ..Default::default()
        },
        ..input
    };
    let error = body("m", &budgeted, MaxTokensField::MaxCompletionTokens).unwrap_err();
    assert_eq!(error.class, crate::execution::ErrorClass::Rejected);
    assert!(
        error
            .message
            .starts_with("input.parameters.reasoning_budget_tokens: "),
        "{}",
        error.message
    );
}
