//! A server's tools as the model is given them: listed page by page within bounds, named
//! `SERVER__TOOL`, refused where a model could not take them.

use rmcp::service::RoleClient;

use super::SEPARATOR;
use crate::provider::ToolDef;

/// Most tools one server may offer.
pub const MAX_TOOLS: usize = 128;

/// Most pages of `tools/list` read from one server.
const MAX_PAGES: usize = 32;

/// Most bytes of a tool's description given to the model; a longer one is cut.
const MAX_DESCRIPTION: usize = 4096;

/// Most bytes of a tool's input schema (as JSON); a server with a larger one is refused.
const MAX_SCHEMA: usize = 64 * 1024;

/// The server's tools, page by page, stopping as soon as there are more than [`MAX_TOOLS`]
/// or more than [`MAX_PAGES`] pages (a server that pages on forever cannot fill bee's memory).
pub(super) async fn list_tools(
    peer: &rmcp::Peer<RoleClient>,
) -> Result<Vec<rmcp::model::Tool>, String> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
        let page = peer
            .list_tools(Some(params))
            .await
            .map_err(|e| format!("did not list its tools: {e}"))?;
        tools.extend(page.tools);
        if tools.len() > MAX_TOOLS {
            return Err(format!(
                "offers more than the {MAX_TOOLS} tools bee takes from one server"
            ));
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(format!("lists its tools in more than {MAX_PAGES} pages"))
}

/// The model's definitions of a server's tools: `SERVER__TOOL`, its description and input
/// schema.
pub(super) fn definitions(
    server: &str,
    tools: Vec<rmcp::model::Tool>,
) -> Result<Vec<ToolDef>, String> {
    if tools.len() > MAX_TOOLS {
        return Err(format!(
            "offers {} tools, more than the {MAX_TOOLS} bee takes from one server",
            tools.len()
        ));
    }
    let mut out: Vec<ToolDef> = Vec::new();
    for tool in tools {
        let full = format!("{server}{SEPARATOR}{}", tool.name);
        let nameable = !tool.name.is_empty()
            && full.len() <= 64
            && full
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !nameable {
            return Err(format!(
                "offers a tool `{}` that cannot be named to a model as `{full}` (1 to 64 \
                 letters, digits, `_` and `-` in all)",
                tool.name
            ));
        }
        if out.iter().any(|d| d.name == full) {
            return Err(format!("offers two tools named `{}`", tool.name));
        }
        let parameters = serde_json::Value::Object((*tool.input_schema).clone());
        let size = parameters.to_string().len();
        if size > MAX_SCHEMA {
            return Err(format!(
                "offers a tool `{}` whose input schema is {size} bytes, more than the \
                 {MAX_SCHEMA} bee gives a model",
                tool.name
            ));
        }
        let mut description = tool.description.map(|d| d.into_owned()).unwrap_or_default();
        if description.len() > MAX_DESCRIPTION {
            let mut end = MAX_DESCRIPTION;
            while !description.is_char_boundary(end) {
                end -= 1;
            }
            description.truncate(end);
            description.push_str(" […]");
        }
        out.push(ToolDef {
            name: full,
            description,
            parameters,
        });
    }
    Ok(out)
}
