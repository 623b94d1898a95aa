//! `kvplan eval niah`: the needle-in-a-haystack grid under every method and budget, on the same
//! examples, in one run. Budgets come from the plan (`--plan`, default
//! `plans/<model>.plan.json`) re-targeted to each `--budgets` value. Records go to
//! `<out>/<model>.niah.records.json` after every cell (a re-run reuses every cell already
//! scored), the aggregated cells and quality points to `<out>/<model>.results.json` (the schema
//! `kvplan plot` reads), the Markdown table to `<out>/<model>.niah.md` and stdout. Progress (bar
//! with ETA, or plain lines) goes to stderr. `--quick`: one 512-token example at depth 0.5 and
//! budget 64, into `<out>/quick/`. The grid and its defaults are
//! `kvplan_app::eval::niah`'s.

use kvplan_app::eval::niah::{self, NiahRequest};

use super::eval_shared::{EvalCommon, PromptArgs, Terminal};

/// Arguments of `kvplan eval niah`.
#[derive(clap::Args, Debug)]
pub struct NiahArgs {
    /// Methods, comma-separated [default: every method of the registry].
    #[arg(long, value_delimiter = ',')]
    pub methods: Option<Vec<String>>,
    /// Budgets (entries per layer and KV head), comma-separated [default: 64,128,256,512].
    #[arg(long, value_delimiter = ',')]
    pub budgets: Option<Vec<usize>>,
    /// Prompt lengths in tokens, comma-separated [default: 1024,2048].
    #[arg(long, value_delimiter = ',')]
    pub lengths: Option<Vec<usize>>,
    /// Needle depths in [0, 1], comma-separated [default: 0,0.25,0.5,0.75,1].
    #[arg(long, value_delimiter = ',')]
    pub depths: Option<Vec<f64>>,
    /// Needles per (length, depth) [default: 5: 50 prompts per method @ budget over the
    /// default lengths and depths].
    #[arg(long)]
    pub examples: Option<usize>,
    /// Seed of the needles.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// One 512-token example at depth 0.5, budget 64 (unless given), into `<out>/quick/`.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub prompts: PromptArgs,
    #[command(flatten)]
    pub common: EvalCommon,
}

impl NiahArgs {
    /// The application layer's request.
    fn request(&self) -> NiahRequest {
        NiahRequest {
            methods: self.methods.clone(),
            budgets: self.budgets.clone(),
            lengths: self.lengths.clone(),
            depths: self.depths.clone(),
            examples: self.examples,
            seed: self.seed,
            quick: self.quick,
            prompts: self.prompts.settings(),
            settings: self.common.settings(),
        }
    }
}

/// Runs `kvplan eval niah`.
pub fn run(args: NiahArgs) -> anyhow::Result<()> {
    niah::run(&args.request(), &mut Terminal::default())
}
