//! Chat prompts rendered from the model's own `tokenizer.chat_template` (Jinja), as Hugging Face's
//! `apply_chat_template` renders them: `trim_blocks` and `lstrip_blocks` on, loop controls,
//! `raise_exception(message)`, Python string methods (`.strip()`, `.startswith()`...) through
//! minijinja-contrib's pycompat; the context holds `messages`, `add_generation_prompt = true` and
//! the special tokens the file names (`bos_token`, `eos_token`, `unk_token`, `pad_token`).
//! Not provided: `tools`, `documents`, and `strftime_now` (templates that use them test whether they
//! are defined), so a prompt never depends on the date. `tojson` is minijinja's, which escapes
//! HTML-unsafe characters unlike Python's `json.dumps`; only tool-call branches use it.
//!
//! The rendered text is tokenized like any text (special tokens written in it are parsed); a
//! template that wants BOS writes `{{ bos_token }}` itself, so nothing is added to it.

use std::collections::BTreeMap;

use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, ErrorKind, Value};

use crate::error::{Error, Result};

/// The key a template is read from.
pub(super) const TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// The name the template is stored under in its environment.
const NAME: &str = "chat_template";

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The message text.
    pub content: String,
}

/// A compiled chat template with the special tokens it may refer to.
#[derive(Clone)]
pub(super) struct ChatTemplate {
    env: Environment<'static>,
    specials: BTreeMap<&'static str, String>,
}

impl ChatTemplate {
    /// Compiles `source`; a syntax error is an error naming the key and the line.
    pub fn new(source: &str, specials: BTreeMap<&'static str, String>) -> Result<Self> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| template_error("configuring the template syntax", &e))?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_template_owned(NAME, source.to_string())
            .map_err(|e| template_error("cannot be compiled", &e))?;
        Ok(Self { env, specials })
    }

    /// Renders `messages` with the generation prompt appended.
    pub fn render(&self, messages: &[ChatMessage]) -> Result<String> {
        let template = self
            .env
            .get_template(NAME)
            .map_err(|e| template_error("cannot be loaded", &e))?;
        let mut ctx: BTreeMap<String, Value> = self
            .specials
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(v.as_str())))
            .collect();
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| {
                let fields = [("role", &m.role), ("content", &m.content)];
                Value::from(
                    fields
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), Value::from(v.as_str())))
                        .collect::<BTreeMap<String, Value>>(),
                )
            })
            .collect();
        ctx.insert("messages".into(), Value::from(messages));
        ctx.insert("add_generation_prompt".into(), Value::from(true));
        template
            .render(ctx)
            .map_err(|e| template_error("failed to render", &e))
    }
}

/// The template's own `raise_exception(message)`: rendering stops with `message`.
fn raise_exception(message: String) -> std::result::Result<Value, minijinja::Error> {
    Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
}

fn template_error(what: &str, e: &minijinja::Error) -> Error {
    let line = e
        .line()
        .map(|l| format!(" (template line {l})"))
        .unwrap_or_default();
    let detail = e.detail().unwrap_or_default();
    let detail = if detail.is_empty() {
        e.kind().to_string()
    } else {
        format!("{}: {detail}", e.kind())
    };
    Error::Tokenizer(format!("{TEMPLATE_KEY} {what}: {detail}{line}"))
}
