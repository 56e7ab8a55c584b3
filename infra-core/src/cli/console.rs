//! Where the runner writes and how it asks: standard output for reports and JSON,
//! standard error for logs, progress, questions and errors.
//!
//! Colour and cursor control only reach a terminal that can take them: none when the
//! stream is not a terminal, when `NO_COLOR` is set (to anything but the empty string),
//! or when `TERM` is `dumb`. A write that fails (a full disk, a closed pipe) is noticed,
//! and the run then exits non-zero.

use std::io::{BufRead, IsTerminal, Write};

/// How progress is shown on standard error while an apply runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressStyle {
    /// Not at all (standard error is not a terminal).
    Off,
    /// One plain line per finished resource (a terminal without cursor control).
    Lines,
    /// One line, rewritten in place.
    InPlace,
}

/// Where the runner writes and how it asks.
pub struct Console {
    /// Standard output: reports and JSON.
    pub out: Box<dyn Write + Send>,
    /// Standard error: logs, progress, questions, errors.
    pub err: Box<dyn Write + Send>,
    /// Whether a person can answer a question.
    pub interactive: bool,
    /// Whether to colour the output.
    pub colour: bool,
    /// How progress is shown.
    pub progress: ProgressStyle,
    /// Asks a yes/no question; `true` for yes.
    pub confirm: Box<dyn FnMut(&str) -> bool + Send>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("interactive", &self.interactive)
            .field("colour", &self.colour)
            .field("progress", &self.progress)
            .finish()
    }
}

/// What the environment allows on a terminal: `NO_COLOR` (set and not empty) and
/// `TERM=dumb` both forbid colour and cursor control.
pub(super) fn decorations_allowed() -> bool {
    decorations(
        std::env::var_os("NO_COLOR").as_deref(),
        std::env::var_os("TERM").as_deref(),
    )
}

fn decorations(no_colour: Option<&std::ffi::OsStr>, term: Option<&std::ffi::OsStr>) -> bool {
    let no_colour = no_colour.is_some_and(|v| !v.is_empty());
    let dumb = term.is_some_and(|t| t == "dumb");
    !no_colour && !dumb
}

impl ProgressStyle {
    /// How progress may be shown on a standard error that is (or is not) a terminal,
    /// with decorations allowed (or not).
    fn choose(err_terminal: bool, decorations: bool) -> Self {
        match (err_terminal, decorations) {
            (false, _) => ProgressStyle::Off,
            (true, false) => ProgressStyle::Lines,
            (true, true) => ProgressStyle::InPlace,
        }
    }
}

impl Console {
    /// The process's own terminal (or pipes).
    pub fn stdio() -> Self {
        let decorations = decorations_allowed();
        let err_terminal = std::io::stderr().is_terminal();
        Console {
            out: Box::new(std::io::stdout()),
            err: Box::new(std::io::stderr()),
            interactive: std::io::stdin().is_terminal() && err_terminal,
            colour: std::io::stdout().is_terminal() && decorations,
            progress: ProgressStyle::choose(err_terminal, decorations),
            confirm: Box::new(|question| {
                eprint!("{question} [y/N] ");
                let _ = std::io::stderr().flush();
                let mut answer = String::new();
                std::io::stdin().lock().read_line(&mut answer).is_ok()
                    && matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
            }),
        }
    }
}

/// A console being written to: remembers the first failed write to standard output,
/// which makes the run exit non-zero.
pub(super) struct Io<'c> {
    console: &'c mut Console,
    failed: Option<std::io::Error>,
}

impl<'c> Io<'c> {
    pub(super) fn new(console: &'c mut Console) -> Self {
        Io {
            console,
            failed: None,
        }
    }

    pub(super) fn colour(&self) -> bool {
        self.console.colour
    }

    pub(super) fn interactive(&self) -> bool {
        self.console.interactive
    }

    pub(super) fn progress(&self) -> ProgressStyle {
        self.console.progress
    }

    /// Writes to standard output.
    pub(super) fn out(&mut self, text: &str) {
        if self.failed.is_none()
            && let Err(e) = self.console.out.write_all(text.as_bytes())
        {
            self.failed = Some(e);
        }
    }

    /// Writes a line to standard error. A failure here has nowhere to be told.
    pub(super) fn err(&mut self, text: &str) {
        let _ = writeln!(self.console.err, "{text}");
    }

    /// Asks a yes/no question.
    pub(super) fn confirm(&mut self, question: &str) -> bool {
        (self.console.confirm)(question)
    }

    /// Flushes standard output and says whether everything written reached it; a
    /// failure is told on standard error.
    pub(super) fn finish(mut self) -> bool {
        if self.failed.is_none()
            && let Err(e) = self.console.out.flush()
        {
            self.failed = Some(e);
        }
        match self.failed.take() {
            None => true,
            Some(e) => {
                let _ = writeln!(
                    self.console.err,
                    "error: the output could not be written ({e}); what it held is lost, but \
                     the run's effects and records are not"
                );
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::{ProgressStyle, decorations};

    #[test]
    fn no_colour_and_a_dumb_terminal_forbid_decorations() {
        let os = |s: &'static str| Some(OsStr::new(s));
        assert!(decorations(None, os("xterm-256color")));
        assert!(decorations(None, None));
        assert!(!decorations(os("1"), os("xterm")));
        assert!(!decorations(os("anything"), None));
        // An empty NO_COLOR is as good as unset (the convention's own rule).
        assert!(decorations(os(""), os("xterm")));
        assert!(!decorations(None, os("dumb")));
    }

    #[test]
    fn progress_rewrites_a_line_only_on_a_terminal_that_allows_it() {
        assert_eq!(ProgressStyle::choose(false, true), ProgressStyle::Off);
        assert_eq!(ProgressStyle::choose(false, false), ProgressStyle::Off);
        assert_eq!(ProgressStyle::choose(true, false), ProgressStyle::Lines);
        assert_eq!(ProgressStyle::choose(true, true), ProgressStyle::InPlace);
    }
}
