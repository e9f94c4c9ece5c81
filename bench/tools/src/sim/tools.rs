//! Tool use read from a request, as a model server reads it (OpenAI Chat Completions and Anthropic
//! Messages): a request that offers tools and does not forbid them gets one call to the tool its
//! `tool_choice` names, or else to the first, with arguments made from that tool's schema; a
//! request whose last turn carries tool results gets those results back as text. So a client's
//! whole round trip (call, run the tool, send the result, read the answer) shows end to end, and
//! every answer is the same for the same request.

use serde_json::{Map, Value};

use crate::endpoint::Endpoint;

/// The text an answer to tool results starts with; the results' text follows it.
pub const RESULT_PREFIX: &str = "tool result: ";

/// What the simulated model says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Text from the simulator's vocabulary, as long as the timing model makes it.
    Vocab,
    /// This text, whole: the answer to tool results.
    Text(String),
    /// One tool call.
    Call(ToolCall),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub name: String,
    /// A JSON object, compact (the text OpenAI sends as `arguments`).
    pub arguments: String,
}

/// Which vocabulary the request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    OpenAi,
    Anthropic,
}

/// What `tool_choice` allows.
#[derive(Debug, PartialEq, Eq)]
enum Choice<'a> {
    None,
    Any,
    Named(&'a str),
}

/// The reply to a request of `endpoint`, or the message of the 400 a real server answers with.
/// Only chat and messages requests take part: other endpoints always get vocabulary text.
pub fn reply(
    endpoint: Endpoint,
    messages: Option<&Value>,
    tools: Option<&Value>,
    tool_choice: Option<&Value>,
) -> Result<Reply, String> {
    let api = match endpoint {
        Endpoint::ChatCompletions => Api::OpenAi,
        Endpoint::Messages => Api::Anthropic,
        _ => return Ok(Reply::Vocab),
    };
    let messages = messages.and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    check_result_ids(api, messages)?;
    let offered = offered_tools(api, tools)?;
    if let Some(results) = trailing_results(api, messages) {
        return Ok(Reply::Text(format!("{RESULT_PREFIX}{results}")));
    }
    let tool = match choice(api, tool_choice) {
        Choice::None => None,
        Choice::Any => offered.first().copied(),
        Choice::Named(name) => Some(
            offered
                .iter()
                .copied()
                .find(|(n, _)| *n == name)
                .ok_or_else(|| format!("'tool_choice' names the tool '{name}', which is not in 'tools'"))?,
        ),
    };
    Ok(tool.map_or(Reply::Vocab, |(name, schema)| {
        let arguments = Value::Object(arguments(schema)).to_string();
        Reply::Call(ToolCall { name: name.to_string(), arguments })
    }))
}

/// The tools a call may go to, as (name, parameter schema), in the request's order. A tool
/// without a name is refused, as the real APIs refuse it; OpenAI tools other than functions
/// (custom, built-in) are left alone: the simulator only calls functions.
fn offered_tools(api: Api, tools: Option<&Value>) -> Result<Vec<(&str, Option<&Value>)>, String> {
    let list = match tools {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => return Err("'tools' must be an array".into()),
    };
    let mut offered = Vec::with_capacity(list.len());
    for (i, tool) in list.iter().enumerate() {
        match api {
            Api::OpenAi => {
                let kind = tool.get("type").and_then(Value::as_str).unwrap_or("function");
                let Some(function) = tool.get("function").filter(|_| kind == "function") else { continue };
                let name = function
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("Missing required parameter: 'tools[{i}].function.name'."))?;
                offered.push((name, function.get("parameters")));
            }
            Api::Anthropic => {
                let name = tool
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("tools.{i}.name: Field required"))?;
                offered.push((name, tool.get("input_schema")));
            }
        }
    }
    Ok(offered)
}

/// Read leniently: a shape the simulator does not know lets the model call a tool, as `auto`.
fn choice(api: Api, tool_choice: Option<&Value>) -> Choice<'_> {
    let Some(tool_choice) = tool_choice else { return Choice::Any };
    let kind = match (api, tool_choice) {
        (Api::OpenAi, Value::String(mode)) => mode.as_str(),
        _ => tool_choice.get("type").and_then(Value::as_str).unwrap_or("auto"),
    };
    // OpenAI names a function at `function.name` (chat) or `name` (the Responses form);
    // Anthropic at `name`.
    let named = tool_choice.pointer("/function/name").or_else(|| tool_choice.get("name")).and_then(Value::as_str);
    match (kind, named) {
        ("none", _) => Choice::None,
        ("function" | "tool", Some(name)) => Choice::Named(name),
        _ => Choice::Any,
    }
}

/// A real server refuses a tool result that names no call; so does the simulator, in each API's
/// words.
fn check_result_ids(api: Api, messages: &[Value]) -> Result<(), String> {
    let has_id = |value: &Value, key: &str| value.get(key).is_some_and(Value::is_string);
    for (i, message) in messages.iter().enumerate() {
        match api {
            Api::OpenAi => {
                if role(message) == Some("tool") && !has_id(message, "tool_call_id") {
                    return Err(format!(
                        "Missing parameter 'messages[{i}].tool_call_id': messages with role 'tool' must have a \
                         'tool_call_id'."
                    ));
                }
            }
            Api::Anthropic => {
                let blocks = message.get("content").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
                for (j, block) in blocks.iter().enumerate() {
                    if is_tool_result(block) && !has_id(block, "tool_use_id") {
                        return Err(format!("messages.{i}.content.{j}.tool_result.tool_use_id: Field required"));
                    }
                }
            }
        }
    }
    Ok(())
}

fn role(message: &Value) -> Option<&str> {
    message.get("role").and_then(Value::as_str)
}

fn is_tool_result(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("tool_result")
}

/// The text of the tool results the conversation ends with, or `None` when the last turn is not
/// one: OpenAI's trailing `tool` messages (one per call answered), or the `tool_result` blocks of
/// Anthropic's last user message. Several results are joined by newlines.
fn trailing_results(api: Api, messages: &[Value]) -> Option<String> {
    let results: Vec<&Value> = match api {
        Api::OpenAi => {
            let start = messages.iter().rposition(|m| role(m) != Some("tool")).map_or(0, |last| last + 1);
            messages[start..].iter().collect()
        }
        Api::Anthropic => {
            let last = messages.last().filter(|m| role(m) == Some("user"))?;
            last.get("content").and_then(Value::as_array)?.iter().filter(|b| is_tool_result(b)).collect()
        }
    };
    if results.is_empty() {
        return None;
    }
    let texts: Vec<String> = results.iter().map(|r| text_of(r.get("content"))).collect();
    Some(texts.join("\n"))
}

/// Text content: a string, or the `text` of the text parts of a list, joined as they come.
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// Arguments made from a tool's JSON schema: a value for each property the schema requires (each
/// property when it lists none), so a client that checks them against the schema accepts them.
pub fn arguments(schema: Option<&Value>) -> Map<String, Value> {
    let Some(root) = schema.filter(|s| s.is_object()) else { return Map::new() };
    let properties = root.get("properties").and_then(Value::as_object);
    let names: Vec<&str> = match root.get("required").and_then(Value::as_array) {
        Some(required) => required.iter().filter_map(Value::as_str).collect(),
        None => properties.map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default(),
    };
    names.into_iter().map(|name| (name.to_string(), sample(root, properties.and_then(|p| p.get(name)), 0))).collect()
}

/// How deep `$ref` and `anyOf` chains are followed (a schema may refer to itself).
const MAX_DEPTH: u8 = 8;

/// One value of `schema` by its type: strings "sim" (or an `enum`'s first value), integers 1,
/// numbers 1.5, booleans true, arrays and objects empty. `root` resolves local `$ref`s, as
/// generated schemas (pydantic's) use them.
fn sample(root: &Value, schema: Option<&Value>, depth: u8) -> Value {
    let Some(schema) = schema.filter(|s| s.is_object() && depth < MAX_DEPTH) else {
        return Value::String("sim".into());
    };
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|values| values.first()) {
        return first.clone();
    }
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    if let Some(path) = schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
        return sample(root, root.pointer(path), depth + 1);
    }
    // An optional field is `anyOf: [{...}, {"type": "null"}]`: take the first that is not null.
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let not_null = options.iter().find(|o| o.get("type").and_then(Value::as_str) != Some("null"));
            if let Some(option) = not_null.or(options.first()) {
                return sample(root, Some(option), depth + 1);
            }
        }
    }
    let kind = match schema.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).find(|k| *k != "null").unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    match kind {
        "integer" => Value::from(1),
        "number" => Value::from(1.5),
        "boolean" => Value::Bool(true),
        "array" => Value::Array(Vec::new()),
        "object" => Value::Object(Map::new()),
        "null" => Value::Null,
        _ => Value::String("sim".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chat(body: Value) -> Result<Reply, String> {
        reply(Endpoint::ChatCompletions, body.get("messages"), body.get("tools"), body.get("tool_choice"))
    }

    fn messages(body: Value) -> Result<Reply, String> {
        reply(Endpoint::Messages, body.get("messages"), body.get("tools"), body.get("tool_choice"))
    }

    fn call(name: &str, arguments: Value) -> Reply {
        Reply::Call(ToolCall { name: name.into(), arguments: arguments.to_string() })
    }

    fn function(name: &str, parameters: Value) -> Value {
        json!({"type": "function", "function": {"name": name, "parameters": parameters}})
    }

    const USER: &str = r#"[{"role": "user", "content": "weather?"}]"#;

    #[test]
    fn arguments_have_a_value_of_its_type_for_each_required_property() {
        let schema = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
                "ratio": {"type": "number"},
                "exact": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "filter": {"type": "object", "properties": {"x": {"type": "string"}}},
                "optional": {"type": "string"},
            },
            "required": ["city", "unit", "days", "ratio", "exact", "tags", "filter"],
        });
        assert_eq!(
            Value::Object(arguments(Some(&schema))),
            json!({"city": "sim", "unit": "celsius", "days": 1, "ratio": 1.5, "exact": true, "tags": [], "filter": {}})
        );
        // Without `required`, every property.
        let all = json!({"properties": {"a": {"type": "integer"}, "b": {}}});
        assert_eq!(Value::Object(arguments(Some(&all))), json!({"a": 1, "b": "sim"}));
        assert!(arguments(None).is_empty());
        assert!(arguments(Some(&json!({"type": "object"}))).is_empty());
        assert!(arguments(Some(&json!("not a schema"))).is_empty());
    }

    #[test]
    fn generated_schema_shapes_are_followed() {
        // pydantic: an optional field, a nested model by reference, a nullable type list.
        let schema = json!({
            "$defs": {"Unit": {"enum": ["c", "f"], "type": "string"}, "Loop": {"$ref": "#/$defs/Loop"}},
            "properties": {
                "note": {"anyOf": [{"type": "null"}, {"type": "integer"}]},
                "unit": {"$ref": "#/$defs/Unit"},
                "count": {"type": ["null", "number"]},
                "fixed": {"const": 7},
                "loop": {"$ref": "#/$defs/Loop"},
                "missing": {"$ref": "#/$defs/Nowhere"},
            },
            "required": ["note", "unit", "count", "fixed", "loop", "missing", "unlisted"],
        });
        assert_eq!(
            Value::Object(arguments(Some(&schema))),
            json!({"note": 1, "unit": "c", "count": 1.5, "fixed": 7, "loop": "sim", "missing": "sim", "unlisted": "sim"})
        );
    }

    #[test]
    fn openai_tool_choice_picks_the_tool() {
        let tools = json!([
            function("first", json!({})),
            function(
                "second",
                json!({"required": ["n"],
            "properties": {"n": {"type": "integer"}}})
            )
        ]);
        let ask = |tool_choice: Value| {
            let mut body = json!({"messages": serde_json::from_str::<Value>(USER).unwrap(), "tools": tools});
            if !tool_choice.is_null() {
                body["tool_choice"] = tool_choice;
            }
            chat(body)
        };
        assert_eq!(ask(Value::Null).unwrap(), call("first", json!({})));
        assert_eq!(ask(json!("auto")).unwrap(), call("first", json!({})));
        assert_eq!(ask(json!("required")).unwrap(), call("first", json!({})));
        assert_eq!(ask(json!("none")).unwrap(), Reply::Vocab);
        let named = json!({"type": "function", "function": {"name": "second"}});
        assert_eq!(ask(named).unwrap(), call("second", json!({"n": 1})));
        let missing = ask(json!({"type": "function", "function": {"name": "third"}})).unwrap_err();
        assert!(missing.contains("'third'"), "{missing}");
        // Non-function tools are not called; with no function tool the answer is text.
        let custom = json!({"messages": [], "tools": [{"type": "custom", "custom": {"name": "c"}}]});
        assert_eq!(chat(custom).unwrap(), Reply::Vocab);
        assert_eq!(chat(json!({"messages": [], "tools": []})).unwrap(), Reply::Vocab);
        assert_eq!(chat(json!({"messages": []})).unwrap(), Reply::Vocab);
        assert!(chat(json!({"tools": [{"type": "function", "function": {}}]})).unwrap_err().contains("function.name"));
        assert!(chat(json!({"tools": {"a": 1}})).unwrap_err().contains("'tools' must be an array"));
    }

    #[test]
    fn anthropic_tool_choice_picks_the_tool() {
        let tools = json!([
            {"name": "first", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}},
            {"name": "second", "input_schema": {"type": "object"}},
        ]);
        let ask = |tool_choice: Value| {
            let mut body = json!({"messages": serde_json::from_str::<Value>(USER).unwrap(), "tools": tools});
            if !tool_choice.is_null() {
                body["tool_choice"] = tool_choice;
            }
            messages(body)
        };
        assert_eq!(ask(Value::Null).unwrap(), call("first", json!({"q": "sim"})));
        assert_eq!(ask(json!({"type": "auto"})).unwrap(), call("first", json!({"q": "sim"})));
        assert_eq!(ask(json!({"type": "any"})).unwrap(), call("first", json!({"q": "sim"})));
        assert_eq!(ask(json!({"type": "tool", "name": "second"})).unwrap(), call("second", json!({})));
        assert_eq!(ask(json!({"type": "none"})).unwrap(), Reply::Vocab);
        assert!(ask(json!({"type": "tool", "name": "third"})).is_err());
        assert!(messages(json!({"tools": [{"input_schema": {}}]})).unwrap_err().contains("tools.0.name"));
    }

    #[test]
    fn tool_results_are_answered_with_their_text() {
        let tools = json!([function("lookup", json!({}))]);
        let openai = json!({"tools": tools, "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "lookup", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "22C, sunny"},
        ]});
        assert_eq!(chat(openai.clone()).unwrap(), Reply::Text("tool result: 22C, sunny".into()));
        // Text parts are joined; several results (parallel calls) one per line.
        let mut parallel = openai.clone();
        if let Some(list) = parallel["messages"].as_array_mut() {
            list.push(json!({"role": "tool", "tool_call_id": "call_2",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}));
        }
        assert_eq!(chat(parallel).unwrap(), Reply::Text("tool result: 22C, sunny\nab".into()));
        // A result earlier in the conversation does not count: the last turn asks again.
        let mut again = openai;
        if let Some(list) = again["messages"].as_array_mut() {
            list.push(json!({"role": "user", "content": "and tomorrow?"}));
        }
        assert_eq!(chat(again).unwrap(), call("lookup", json!({})));

        let anthropic = json!({"messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                    {"type": "text", "text": "22C"}, {"type": "image", "source": {}}, {"type": "text", "text": ", sunny"},
                ]},
                {"type": "text", "text": "thanks"},
            ]},
        ]});
        assert_eq!(messages(anthropic).unwrap(), Reply::Text("tool result: 22C, sunny".into()));
        let plain = json!({"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}]});
        assert_eq!(messages(plain).unwrap(), Reply::Text("tool result: ok".into()));
        let empty = json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]});
        assert_eq!(messages(empty).unwrap(), Reply::Text("tool result: ".into()));
    }

    #[test]
    fn results_without_the_id_of_their_call_are_refused() {
        let openai = json!({"messages": [{"role": "tool", "content": "x"}, {"role": "user", "content": "y"}]});
        let message = chat(openai).unwrap_err();
        assert!(message.contains("'messages[0].tool_call_id'"), "{message}");
        let anthropic = json!({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "x"}, {"type": "tool_result", "content": "x"}]}]});
        assert_eq!(messages(anthropic).unwrap_err(), "messages.0.content.1.tool_result.tool_use_id: Field required");
    }

    #[test]
    fn other_endpoints_answer_with_text() {
        let tools = json!([function("lookup", json!({}))]);
        for endpoint in [Endpoint::Completions, Endpoint::Responses, Endpoint::Embeddings] {
            assert_eq!(reply(endpoint, None, Some(&tools), None).unwrap(), Reply::Vocab);
        }
    }
}
