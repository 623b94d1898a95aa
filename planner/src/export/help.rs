//! `kvplan export --help`'s list of formats, read from the target table: each format's name, its
//! files and what they hold, and the architectures its engine honours or refuses (the
//! capability table's entries).

use super::target::ExportTarget;
use super::targets::Format;
use crate::export::capability::Arch;

/// Columns the list wraps at.
const WIDTH: usize = 96;

/// One paragraph per format, in table order: `  name  files: what they hold. Honours …`.
pub fn help_lines() -> String {
    let width = Format::ALL
        .iter()
        .map(|f| f.name().len())
        .max()
        .unwrap_or(0);
    Format::ALL
        .iter()
        .map(|f| {
            let t = f.target();
            let text = format!(
                "{}: {}. {}",
                t.files().join(" + "),
                t.holds(),
                architectures(t)
            );
            wrap(&format!("  {:width$}  ", t.name()), &text)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What `t` honours for each architecture, as the capability table says:
/// `Honours llama (full layers and one window), qwen2 (one window on every layer); refuses
/// gemma3.` One parenthesis when every architecture gets the same rule; none for the packages,
/// which read budgets or scores rather than windows.
pub fn architectures(t: &dyn ExportTarget) -> String {
    let mut honoured = Vec::new();
    let mut refused = Vec::new();
    for arch in Arch::ALL {
        match t.capability(arch) {
            Ok(c) => honoured.push((arch.name(), c.layers.map(|l| l.describe()))),
            Err(_) => refused.push(arch.name()),
        }
    }
    let same = honoured.windows(2).all(|w| w[0].1 == w[1].1);
    let mut text = String::from("Honours ");
    let names: Vec<String> = honoured
        .iter()
        .map(|(arch, rule)| match rule {
            Some(rule) if !same => format!("{arch} ({rule})"),
            _ => arch.to_string(),
        })
        .collect();
    text.push_str(&names.join(", "));
    if let (true, Some((_, Some(rule)))) = (same, honoured.first()) {
        text.push_str(&format!(" ({rule})"));
    }
    if honoured.is_empty() {
        return format!("Honours nothing yet; refuses {}.", refused.join(", "));
    }
    if !refused.is_empty() {
        text.push_str(&format!("; refuses {}", refused.join(", ")));
    }
    text.push('.');
    text
}

/// `text` after `lead`, wrapped at [`WIDTH`] under a hanging indent as wide as `lead`.
fn wrap(lead: &str, text: &str) -> String {
    let indent = " ".repeat(lead.chars().count());
    let mut out = String::from(lead);
    let mut col = out.chars().count();
    let mut first = true;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if !first && col + 1 + len > WIDTH {
            out.push('\n');
            out.push_str(&indent);
            col = indent.len();
            first = true;
        }
        if !first {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += len;
        first = false;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_under_a_hanging_indent() {
        let text = "alpha beta gamma ".repeat(10);
        let out = wrap("  x  ", &text);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.len() > 1);
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH), "{out}");
        assert!(lines[0].starts_with("  x  alpha"));
        assert!(lines[1..]
            .iter()
            .all(|l| l.starts_with("     ") && !l[5..].starts_with(' ')));
        assert_eq!(out.split_whitespace().count(), 31);
    }

    #[test]
    fn lists_every_format_with_what_it_honours() {
        // The paragraphs with their line breaks undone.
        let lines = help_lines();
        let help = format!(
            " {}",
            lines.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        for f in Format::ALL {
            assert!(help.contains(&format!(" {} ", f.name())), "{help}");
        }
        // vLLM: Llama two classes, Qwen2 one window, Gemma 3 its local window (the capability
        // table).
        assert!(
            help.contains("llama (full layers and one window)"),
            "{help}"
        );
        assert!(
            help.contains("qwen2 (one window on every layer), gemma3 (the model's windowed layers at one window); refuses qwen3"),
            "{help}"
        );
        // SGLang: every architecture refused, said so.
        assert!(
            help.contains("Honours nothing yet; refuses llama, qwen2, gemma3"),
            "{help}"
        );
        // HeadKV: Llama only.
        assert!(
            help.contains(
                "Honours llama; refuses qwen2, gemma3, qwen3, olmo2, phi3, gemma2, smollm3."
            ),
            "{help}"
        );
    }
}
