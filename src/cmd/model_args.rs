//! The model, press and weights arguments several commands share, and their conversion into
//! the application layer's requests (`kvplan_app::model`, which resolves and loads them).

use std::path::PathBuf;

use kvplan_app::model::ModelSource;
use kvplan_planner::Target;
use kvplan_runtime::model::quant::{self, Kernels};
use kvplan_runtime::press::options::PressOptions;
use kvplan_runtime::press::options::{Denominator, SpindleGqa};
use kvplan_runtime::press::GqaAggregation;

/// Which model file to use.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// A catalog model (`kvplan models` lists them) or a GGUF file [default:
    /// smollm2-135m-instruct].
    #[arg(long, value_name = "NAME|PATH", global = true)]
    pub model: Option<String>,
    /// Folder of fetched models [env: KVPLAN_MODELS; default: ~/.cache/kvplan/models].
    #[arg(long, value_name = "DIR", global = true)]
    pub models_dir: Option<PathBuf>,
    /// CPU kernels for quantised weights: `int8` (activations quantised to 8 bits, integer dot
    /// products — a prefill on AVX-512 VNNI or AVX2 in blocks of 32, decode's Q4_K, Q5_K and Q6_K
    /// rows on AVX-512 VNNI in blocks of 256 as llama.cpp's; faster, logits moved about as much as llama.cpp's own integer path moves
    /// them, docs/speed.md) or `f32` (the exact dequantised weights) [env: KVPLAN_KERNELS;
    /// default: int8 for generate and bench, f32 for profile and eval, whose numbers are the
    /// project's measurements; int8 only on a CPU with AVX-512 VNNI, where it was measured
    /// faster].
    #[arg(long, value_name = "f32|int8", global = true)]
    pub kernels: Option<Kernels>,
}

impl ModelArgs {
    /// Sets this process's prefill kernels: `--kernels`, else `KVPLAN_KERNELS`, else `default` —
    /// where `default` is int8, only on a CPU whose integer kernel was measured faster
    /// (`quant::int8_preferred`: AVX-512 VNNI), else f32.
    pub fn use_kernels(&self, default: Kernels) {
        let from_env = quant::kernels_from_env();
        let default = match default {
            Kernels::Int8 if !quant::int8_preferred() => Kernels::F32,
            k => k,
        };
        quant::set_kernels(self.kernels.or(from_env).unwrap_or(default));
    }

    /// The application layer's model source.
    pub fn source(&self) -> ModelSource {
        ModelSource {
            model: self.model.clone(),
            models_dir: self.models_dir.clone(),
        }
    }
}

/// The press switches beyond the plan (`kvplan generate`, `kvplan eval`), recorded in every
/// results file's settings.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PressArgs {
    /// How window-based selections (snapkv, pyramid, headkv, headkv-r; spindle under
    /// `--spindle-gqa group`) combine a KV head's query heads: pool-then-mean (each query head
    /// pooled, then the mean), mean-then-pool (KVCache-Factory's KV-head mode),
    /// max-then-pool.
    #[arg(long, value_name = "MODE", default_value = "pool-then-mean")]
    pub gqa: GqaAggregation,
    /// SpindleKV on a GQA model: repeat (KV heads repeated per query head before eviction,
    /// §3.3, the paper's choice) or group (one decision per KV head, eq. 3).
    #[arg(long, value_name = "MODE", default_value = "repeat")]
    pub spindle_gqa: SpindleGqa,
    /// SpindleKV's eq. 2 denominator: window-rows (the window's mean) or l-a (as printed).
    #[arg(long, value_name = "D", default_value = "window-rows")]
    pub spindle_denominator: Denominator,
}

impl PressArgs {
    /// The runtime's press options (positions: each method's own).
    pub fn options(&self) -> PressOptions {
        PressOptions {
            gqa: self.gqa,
            spindle_gqa: self.spindle_gqa,
            spindle_denominator: self.spindle_denominator,
            positions: None,
        }
    }
}

/// `--plan`, `--budget`, `--ratio`: the plan the presses take their budgets from and a
/// re-target of it (`kvplan generate`, `kvplan bench`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PlanArgs {
    /// Plan the budgets come from [default: plans/<slug>.plan.json].
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// Re-target the plan: entries per (layer, KV head), observation window included.
    #[arg(long, value_name = "N", conflicts_with = "ratio")]
    pub budget: Option<usize>,
    /// Re-target the plan: share of the prompt kept per head, 0 < R <= 1.
    #[arg(long, value_name = "R")]
    pub ratio: Option<f64>,
}

impl PlanArgs {
    /// The re-target asked for (`--budget` wins); `None`: the plan's own target.
    pub fn target(&self) -> Option<Target> {
        kvplan_app::model::retarget(self.budget, self.ratio)
    }
}

/// `--weights`: weights written by `kvplan train-pod`, applied over the GGUF's.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct WeightsArg {
    /// Burnpack weights (e.g. `runs/pod-train/pod-trained.bpk` from `kvplan train-pod`) that
    /// replace the GGUF's; the GGUF still gives the geometry and the tokenizer.
    #[arg(long, value_name = "FILE")]
    pub weights: Option<PathBuf>,
}
