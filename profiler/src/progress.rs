//! Progress reporting: the library says what it is doing; the binary draws the bars.

/// Receives the profiler's progress, one stage at a time.
pub trait Progress {
    /// A stage of `total` units begins; `done` of them were restored from partial results.
    fn start(&mut self, stage: &str, total: u64, done: u64);
    /// One unit of the current stage finished; `message` says what it was.
    fn advance(&mut self, message: &str);
    /// The current stage ended; `summary` is one line about it.
    fn finish(&mut self, summary: &str);
    /// A line worth telling the user outside any stage (e.g. partial results not reused).
    fn note(&mut self, line: &str);
}

/// Progress that goes nowhere (tests, library use).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&mut self, _stage: &str, _total: u64, _done: u64) {}
    fn advance(&mut self, _message: &str) {}
    fn finish(&mut self, _summary: &str) {}
    fn note(&mut self, _line: &str) {}
}
