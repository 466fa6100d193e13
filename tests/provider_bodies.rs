//! Request bodies each wire format sends for the same conversation, and the item model's
//! JSON form (used by transcripts and recordings).

use bee::provider::{Item, Request, ToolCall, anthropic, openai_chat, openai_responses};
use serde_json::json;

fn call(id: &str, args: &str) -> Item {
    Item::ToolCall(ToolCall {
        id: id.into(),
        name: "shell".into(),
        arguments: args.into(),
    })
}

fn result(id: &str, is_error: bool) -> Item {
    Item::ToolResult {
        call_id: id.into(),
        output: format!("out {id}"),
        is_error,
    }
}

fn conversation() -> Request {
    Request {
        items: vec![
            Item::System { text: "a".into() },
            Item::System { text: "b".into() },
            Item::User { text: "go".into() },
            Item::AssistantText {
                text: "two calls".into(),
            },
            call("c1", r#"{"cmd":"ls"}"#),
            call("c2", "not json"),
            result("c1", false),
            result("c2", true),
        ],
        tools: Vec::new(),
        max_output_tokens: None,
    }
}

#[test]
fn chat_merges_an_assistant_turn_into_one_message() {
    let body = openai_chat::body("m", &conversation());
    let messages = body["messages"]
        .as_array()
        .unwrap_or_else(|| unreachable!());
    assert_eq!(messages.len(), 6, "{body:#}");
    assert_eq!(messages[3]["content"], "two calls");
    assert_eq!(messages[3]["tool_calls"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        messages[3]["tool_calls"][1]["function"]["arguments"],
        "not json"
    );
    assert_eq!(
        messages[4],
        json!({"role": "tool", "tool_call_id": "c1", "content": "out c1"})
    );
    assert!(body.get("max_tokens").is_none());
    assert!(body.get("tools").is_none());
}

#[test]
fn anthropic_alternates_roles_and_requires_objects() {
    let body = anthropic::body("m", &conversation(), 777);
    assert_eq!(body["system"], "a\n\nb");
    assert_eq!(body["max_tokens"], 777);
    let messages = body["messages"]
        .as_array()
        .unwrap_or_else(|| unreachable!());
    assert_eq!(messages.len(), 3, "{body:#}");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"].as_array().map(Vec::len), Some(3));
    assert_eq!(messages[1]["content"][1]["input"], json!({"cmd": "ls"}));
    assert_eq!(
        messages[1]["content"][2]["input"],
        json!({"_raw": "not json"})
    );
    assert_eq!(messages[2]["role"], "user");
    assert_eq!(messages[2]["content"][1]["is_error"], true);
}

#[test]
fn responses_sends_items_one_to_one() {
    let body = openai_responses::body("m", &conversation());
    let input = body["input"].as_array().unwrap_or_else(|| unreachable!());
    assert_eq!(input.len(), 8);
    assert_eq!(input[4]["type"], "function_call");
    assert_eq!(input[4]["call_id"], "c1");
    assert_eq!(input[7]["type"], "function_call_output");
    assert_eq!(body["store"], false);
}

#[test]
fn responses_sends_reasoning_by_its_encrypted_content_and_never_its_server_id() {
    let mut req = conversation();
    req.items.insert(
        3,
        Item::Reasoning {
            item: json!({"type": "reasoning", "id": "rs_9", "status": "completed",
                "summary": [{"type": "summary_text", "text": "s"}], "encrypted_content": "enc"}),
        },
    );
    // Without encrypted content there is nothing the API can read (it keeps no item).
    req.items.insert(
        4,
        Item::Reasoning {
            item: json!({"type": "reasoning", "id": "rs_10", "summary": []}),
        },
    );
    let body = openai_responses::body("m", &req);
    let input = body["input"].as_array().unwrap_or_else(|| unreachable!());
    assert_eq!(input.len(), 9, "{body:#}");
    assert_eq!(
        input[3],
        json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}],
            "encrypted_content": "enc"})
    );
    assert!(!body.to_string().contains("rs_"), "{body:#}");
}

#[test]
fn items_round_trip_through_json() {
    let items = conversation().items;
    let text = serde_json::to_string(&items).unwrap_or_else(|e| unreachable!("{e}"));
    assert!(
        text.contains(r#"{"type":"tool_call","id":"c1","name":"shell""#),
        "{text}"
    );
    let back: Vec<Item> = serde_json::from_str(&text).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(back, items);
}
