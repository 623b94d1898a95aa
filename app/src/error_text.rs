//! The one line the CLI prints for an error: the message and its causes, each said once.
//!
//! `anyhow`'s `{:#}` appends every cause of the chain after the message; the libraries' error
//! types (`thiserror`, e.g. `kvplan_eval::Error::Io`, `#[error("{path}: {source}")]`) already
//! put their source's text in their own message, so `{:#}` said it twice ("x.json: No such file
//! or directory (os error 2): No such file or directory (os error 2)"). Here a cause is appended
//! only when the line does not already hold its text.

/// `e`'s message, then each cause of its chain whose text the line does not already hold.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    /// A library error that says its source in its own message, as `thiserror`'s
    /// `#[error("{path}: {source}")]` does.
    #[derive(Debug)]
    struct Says {
        path: &'static str,
        source: io::Error,
    }

    impl std::fmt::Display for Says {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}: {}", self.path, self.source)
        }
    }

    impl std::error::Error for Says {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    fn missing() -> io::Error {
        io::Error::new(io::ErrorKind::NotFound, "no such file")
    }

    #[test]
    fn a_source_the_message_already_says_is_not_said_again() {
        let e = anyhow::Error::new(Says {
            path: "a.json",
            source: missing(),
        });
        assert_eq!(
            format!("{e:#}"),
            "a.json: no such file: no such file",
            "anyhow's own"
        );
        assert_eq!(one_line(&e), "a.json: no such file");
    }

    #[test]
    fn context_and_causes_not_yet_said_are_kept_in_order() {
        let e = anyhow::Error::new(missing())
            .context("reading b.json")
            .context("loading the plan");
        assert_eq!(
            one_line(&e),
            "loading the plan: reading b.json: no such file"
        );
        let e = anyhow::Error::new(Says {
            path: "c.json",
            source: missing(),
        })
        .context("merging");
        assert_eq!(one_line(&e), "merging: c.json: no such file");
    }
}
