//! A plan's per-layer budgets reduced to the layer classes a serving engine can express.
//!
//! No serving engine reads a per-head budget. What they read is one attention window per layer:
//! vLLM (and transformers) two classes — a layer is `full_attention` or `sliding_attention`
//! with ONE `sliding_window` for all sliding layers (HF `config.json` `layer_types`); TensorRT-LLM
//! takes one window per layer (`KvCacheConfig.max_attention_window`, L entries) but frees
//! blocks at its smallest window only ([`super::blocks`]), so it is given two classes as well;
//! the legacy engine's kernel honours each (the `trtllm-engine` capability). A layer's budget here
//! is its plan budget averaged over its KV heads (the engines give every head of a layer the same
//! window), at one context length `n`.
//!
//! **Two classes** ([`two_classes`]): the `k` layers with the largest budgets stay full (`n`
//! entries), the other global layers share one window `W = round((T − k·n) / (G − k))`, where
//! `T` is the plan's total over the `G` global layers — so the reduction keeps the plan's bytes
//! up to the rounding of `W`. Among the `k` for which `1 ≤ W ≤ n`, the one whose assignment is
//! closest to the plan's budgets (least squares over the layers) wins; ties: fewer full layers.
//! A model whose own sliding layers fix the window (Gemma 3: `sliding_window` is the model's)
//! keeps that `W` and chooses `k` by the bytes instead (closest total, then least squares).
//!
//! **Per-layer windows** ([`per_layer`]): each global layer's window is its budget rounded to the
//! nearest entry (at least 1, at most `n`); a layer the model already windows keeps its window.
//!
//! **One window** ([`one_window`], vLLM's Qwen2): every global layer slides over
//! `W = round(T / G)` (full attention when `W ≥ n`), the plan's bytes up to the rounding of `W`.
//!
//! **The model's windows only** ([`native_only`], llama.cpp's Gemma 3): global layers stay
//! full; the `S` windowed layers share `W = round((T_all − G·n) / S)`, at most the model's own
//! window, where `T_all` is the plan's total over every layer — refused when the global layers
//! alone hold more than the plan (`W < 1`).
//!
//! [`reduce`] picks the rule a capability entry names ([`super::capability::Layers`]).

use super::capability::Layers;
use crate::{Error, Method, Plan, Result, Target};

/// The classes of one layer under a reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerClass {
    /// Every token (`full_attention`).
    Full,
    /// The last `window` tokens (`sliding_attention`).
    Window(usize),
}

impl LayerClass {
    /// A global layer given window `w` at context `n`: full where the window covers the
    /// context — written as a window it would slide once decoding passes `n`, where the plan
    /// keeps every entry.
    fn global(w: usize, n: usize) -> Self {
        if w >= n {
            LayerClass::Full
        } else {
            LayerClass::Window(w)
        }
    }

    /// Entries held per KV head at context `n`.
    pub fn held(self, n: usize) -> usize {
        match self {
            LayerClass::Full => n,
            LayerClass::Window(w) => w.min(n),
        }
    }
}

/// What a reduction holds against the plan it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduction {
    /// One class per layer.
    pub layers: Vec<LayerClass>,
    /// Entries per KV head summed over layers, as the plan gives them (windowed layers included).
    pub plan_entries: f64,
    /// The same under the reduction.
    pub reduced_entries: usize,
}

impl Reduction {
    /// The reduction's bytes over the plan's, minus 1 (0: the plan's bytes exactly).
    pub fn bytes_error(&self) -> f64 {
        if self.plan_entries > 0.0 {
            self.reduced_entries as f64 / self.plan_entries - 1.0
        } else {
            0.0
        }
    }

    /// The one window of the sliding layers, when there is one.
    pub fn window(&self) -> Option<usize> {
        self.layers.iter().find_map(|c| match c {
            LayerClass::Window(w) => Some(*w),
            LayerClass::Full => None,
        })
    }
}

/// The layer budgets a reduction starts from: `budgets[l]` (entries per KV head, averaged over
/// the layer's KV heads) and the model's own window of each layer (`None`: a global layer).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerBudgets {
    /// Context length the budgets are for.
    pub context_len: usize,
    /// Mean entries per KV head of each layer.
    pub budgets: Vec<f64>,
    /// The model's sliding window of each layer, `None` for a global layer.
    pub model_windows: Vec<Option<usize>>,
}

impl LayerBudgets {
    /// `method`'s budgets in `plan` at context `n` under `target`, averaged over each layer's KV
    /// heads, with the model's own windows.
    pub fn of(plan: &Plan, method: Method, n: usize, target: Target) -> Result<Self> {
        let b = plan.budgets(method, n, target)?;
        Ok(LayerBudgets {
            context_len: n,
            budgets: b
                .per_layer_per_kv_head
                .iter()
                .map(|row| row.iter().sum::<usize>() as f64 / row.len().max(1) as f64)
                .collect(),
            model_windows: plan.model.geometry.layer_windows.clone(),
        })
    }

    fn check(&self) -> Result<()> {
        if self.budgets.len() != self.model_windows.len() || self.budgets.is_empty() {
            return Err(Error::invalid(
                "layers",
                "one budget and one window entry per layer",
                format!(
                    "{} budgets, {} windows",
                    self.budgets.len(),
                    self.model_windows.len()
                ),
            ));
        }
        if self.context_len == 0 {
            return Err(Error::invalid("context_len", "at least 1", 0));
        }
        Ok(())
    }

    fn global(&self) -> Vec<usize> {
        (0..self.budgets.len())
            .filter(|&l| self.model_windows[l].is_none())
            .collect()
    }

    fn reduction(&self, layers: Vec<LayerClass>) -> Reduction {
        let n = self.context_len;
        Reduction {
            plan_entries: self.budgets.iter().sum(),
            reduced_entries: layers.iter().map(|c| c.held(n)).sum(),
            layers,
        }
    }
}

/// The model's window of every windowed layer, which the two classes must share.
fn native_window(b: &LayerBudgets) -> Result<Option<usize>> {
    let mut windows: Vec<usize> = b.model_windows.iter().flatten().copied().collect();
    windows.sort_unstable();
    windows.dedup();
    match windows.as_slice() {
        [] => Ok(None),
        [w] => Ok(Some(*w)),
        _ => Err(Error::invalid(
            "model.geometry.layer_windows",
            "one sliding window for every windowed layer (a two-class export has one)",
            format!("{windows:?}"),
        )),
    }
}

/// Squared distance between the plan's budgets of `layers` and what `classes` hold there.
fn squared_error(b: &LayerBudgets, classes: &[LayerClass]) -> f64 {
    let n = b.context_len;
    b.budgets
        .iter()
        .zip(classes)
        .map(|(&x, c)| (c.held(n) as f64 - x).powi(2))
        .sum()
}

/// Two classes (module header): full layers and one sliding window, the plan's bytes kept.
pub fn two_classes(b: &LayerBudgets) -> Result<Reduction> {
    b.check()?;
    let n = b.context_len;
    let native = native_window(b)?;
    let global = b.global();
    // Global layers by budget, largest first (ties: the earlier layer).
    let mut order = global.clone();
    order.sort_by(|&x, &y| b.budgets[y].total_cmp(&b.budgets[x]).then(x.cmp(&y)));
    let total: f64 = global.iter().map(|&l| b.budgets[l]).sum();
    let g = global.len();
    let mut best: Option<(f64, f64, Vec<LayerClass>)> = None;
    for k in 0..=g {
        let window = match native {
            Some(w) => w,
            None if k == g => n,
            None => {
                let w = ((total - (k * n) as f64) / (g - k) as f64).round();
                if w < 1.0 || w > n as f64 {
                    continue;
                }
                w as usize
            }
        };
        let shared = match native {
            Some(_) => LayerClass::Window(window),
            None => LayerClass::global(window, n),
        };
        let mut classes: Vec<LayerClass> = b
            .model_windows
            .iter()
            .map(|w| w.map_or(shared, LayerClass::Window))
            .collect();
        for &l in &order[..k] {
            classes[l] = LayerClass::Full;
        }
        let held: usize = global.iter().map(|&l| classes[l].held(n)).sum();
        // Without a native window every feasible k keeps the bytes (up to rounding): rank by
        // the squared error alone.
        let bytes_gap = match native {
            Some(_) => (held as f64 - total).abs(),
            None => 0.0,
        };
        let err = squared_error(b, &classes);
        let better = best
            .as_ref()
            .is_none_or(|(gap, e, _)| (bytes_gap, err) < (*gap, *e));
        if better {
            best = Some((bytes_gap, err, classes));
        }
    }
    let (_, _, classes) = best.ok_or_else(|| {
        Error::invalid(
            "budgets",
            "a total the layers can hold as full layers and one window of at least 1 entry",
            format!("{total:.1} entries over {g} global layers at n = {n}"),
        )
    })?;
    Ok(b.reduction(classes))
}

/// One window per layer (module header).
pub fn per_layer(b: &LayerBudgets) -> Result<Reduction> {
    b.check()?;
    let n = b.context_len;
    let classes = b
        .budgets
        .iter()
        .zip(&b.model_windows)
        .map(|(&x, w)| match w {
            Some(w) => LayerClass::Window(*w),
            None => LayerClass::global((x.round() as usize).clamp(1, n), n),
        })
        .collect();
    Ok(b.reduction(classes))
}

/// One window on every global layer (module header).
pub fn one_window(b: &LayerBudgets) -> Result<Reduction> {
    b.check()?;
    let n = b.context_len;
    let global = b.global();
    let total: f64 = global.iter().map(|&l| b.budgets[l]).sum();
    let w = ((total / global.len().max(1) as f64).round() as usize).clamp(1, n);
    let class = LayerClass::global(w, n);
    let classes = b
        .model_windows
        .iter()
        .map(|own| own.map_or(class, LayerClass::Window))
        .collect();
    Ok(b.reduction(classes))
}

/// Global layers full, the model's windowed layers at one window that keeps the bytes (module
/// header).
pub fn native_only(b: &LayerBudgets) -> Result<Reduction> {
    b.check()?;
    let n = b.context_len;
    let own = native_window(b)?.ok_or_else(|| {
        Error::invalid(
            "model.geometry.layer_windows",
            "windowed layers (only the model's own windows can be changed)",
            "none",
        )
    })?;
    let g = b.global().len();
    let s = b.budgets.len() - g;
    let total: f64 = b.budgets.iter().sum();
    let left = total - (g * n) as f64;
    let w = (left / s as f64).round();
    if w < 1.0 {
        return Err(Error::invalid(
            "budgets",
            format!(
                "room beside the {g} full global layers ({} entries at n = {n}) for the windowed \
                 layers: a larger --budget or a shorter --context-len",
                g * n
            ),
            format!("{total:.0} entries in the plan"),
        ));
    }
    let w = (w as usize).min(own);
    let classes = b
        .model_windows
        .iter()
        .map(|m| m.map_or(LayerClass::Full, |_| LayerClass::Window(w)))
        .collect();
    Ok(b.reduction(classes))
}

/// The reduction `layers` names (module header).
pub fn reduce(layers: Layers, b: &LayerBudgets) -> Result<Reduction> {
    match layers {
        Layers::TwoClasses => two_classes(b),
        Layers::OneWindow => one_window(b),
        Layers::PerLayer => per_layer(b),
        Layers::NativeWindowOnly => native_only(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_window_is_the_mean_and_full_past_the_context() {
        // Budgets 700, 500, 100, 100 at n = 1000: W = 1400 / 4 = 350 on every layer.
        let r = one_window(&budgets(1000, &[700.0, 500.0, 100.0, 100.0], &[None; 4])).unwrap();
        assert_eq!(r.layers, vec![LayerClass::Window(350); 4]);
        assert_eq!(r.reduced_entries, 1400);
        let r = one_window(&budgets(100, &[100.0; 2], &[None; 2])).unwrap();
        assert_eq!(r.layers, vec![LayerClass::Full; 2]);
    }

    #[test]
    fn native_only_keeps_globals_full_and_shrinks_the_local_window() {
        // Gemma-like at n = 1024: locals 0, 2 (own window 512), globals 1, 3 with budgets 512
        // each: T = 4 · 512 = 2048; the globals hold 2 · 1024 = 2048, nothing left: refused.
        let w = Some(512);
        let b = budgets(1024, &[512.0; 4], &[w, None, w, None]);
        let e = native_only(&b).unwrap_err().to_string();
        assert!(e.contains("--budget") && e.contains("2048"), "{e}");
        // Three locals, one global, budgets 512 (locals) and 700: T = 2236, left 1212 → W = 404.
        let b = budgets(1024, &[512.0, 512.0, 512.0, 700.0], &[w, w, w, None]);
        let r = native_only(&b).unwrap();
        use LayerClass::{Full, Window};
        assert_eq!(r.layers, vec![Window(404), Window(404), Window(404), Full]);
        // Plenty of room: capped at the model's own window.
        let b = budgets(1024, &[512.0, 512.0, 512.0, 1024.0], &[w, w, w, None]);
        assert_eq!(native_only(&b).unwrap().window(), Some(512));
    }

    fn budgets(n: usize, b: &[f64], windows: &[Option<usize>]) -> LayerBudgets {
        LayerBudgets {
            context_len: n,
            budgets: b.to_vec(),
            model_windows: windows.to_vec(),
        }
    }

    #[test]
    fn two_classes_are_full_layers_where_the_budgets_cover_the_context() {
        // A prompt no longer than the budget (n = 38, budget 128 capped at 38 on every layer):
        // W = 4 · 38 / 4 = 38 = n, so every layer is full rather than a 38-entry window that
        // would slide away the prompt's first tokens once decoding passes them.
        let r = two_classes(&budgets(38, &[38.0; 4], &[None; 4])).unwrap();
        assert_eq!(r.layers, vec![LayerClass::Full; 4]);
        // A model's own window stays its own.
        let r = two_classes(&budgets(38, &[38.0; 2], &[Some(16), None])).unwrap();
        assert_eq!(r.layers, vec![LayerClass::Window(16), LayerClass::Full]);
    }

    #[test]
    fn two_classes_keep_the_bytes_and_follow_the_budgets() {
        // n = 1000, four layers with budgets 700, 500, 100, 100 (total 1400).
        // k = 0: W = 350, error 350² + 150² + 250² + 250² = 270 000.
        // k = 1 (layer 0 full): W = (1400 − 1000) / 3 = 133.3 → 133; error 300² + 367² + 33² + 33²
        //   = 90 000 + 134 689 + 1 089 + 1 089 = 226 867.
        // k = 2: W = (1400 − 2000) / 2 < 1, infeasible. So k = 1, W = 133, held 1 399.
        let b = budgets(1000, &[700.0, 500.0, 100.0, 100.0], &[None; 4]);
        let r = two_classes(&b).unwrap();
        use LayerClass::{Full, Window};
        assert_eq!(r.layers, vec![Full, Window(133), Window(133), Window(133)]);
        assert_eq!(r.reduced_entries, 1399);
        assert!((r.bytes_error() - (1399.0 / 1400.0 - 1.0)).abs() < 1e-12);
        assert_eq!(r.window(), Some(133));
    }

    #[test]
    fn a_uniform_plan_is_one_window_and_no_compression_is_all_full() {
        let r = two_classes(&budgets(512, &[128.0; 3], &[None; 3])).unwrap();
        assert_eq!(r.layers, vec![LayerClass::Window(128); 3]);
        let r = two_classes(&budgets(512, &[512.0; 3], &[None; 3])).unwrap();
        // k = 0 gives W = 512 = n (every layer holds n): a window as long as the context is a
        // full layer, so that decoding past n slides nothing away.
        assert_eq!(r.layers, vec![LayerClass::Full; 3]);
        assert_eq!(r.reduced_entries, 3 * 512);
    }

    #[test]
    fn a_native_window_is_kept_and_k_follows_the_bytes() {
        // Gemma-like: layers 0 and 2 slide over 512 (they hold 512 at n = 4096 whatever the
        // plan), layers 1, 3, 4, 5 are global with budgets 4096, 2048, 600, 500 (total 7244).
        // W is fixed at 512: k full layers hold k·4096 + (4 − k)·512: k = 1 → 5632 (gap 1612),
        // k = 2 → 9216 (gap 1972). k = 1: layer 1 (the largest) full.
        let w = Some(512);
        let b = budgets(
            4096,
            &[512.0, 4096.0, 512.0, 2048.0, 600.0, 500.0],
            &[w, None, w, None, None, None],
        );
        let r = two_classes(&b).unwrap();
        use LayerClass::{Full, Window};
        assert_eq!(
            r.layers,
            vec![
                Window(512),
                Full,
                Window(512),
                Window(512),
                Window(512),
                Window(512)
            ]
        );
        assert_eq!(r.reduced_entries, 512 * 5 + 4096);
    }

    #[test]
    fn two_native_windows_are_refused() {
        let b = budgets(100, &[10.0; 3], &[Some(8), Some(16), None]);
        let e = two_classes(&b).unwrap_err().to_string();
        assert!(e.contains("layer_windows") && e.contains("[8, 16]"), "{e}");
    }

    #[test]
    fn per_layer_rounds_each_budget() {
        let b = budgets(100, &[99.6, 12.4, 0.2, 50.5], &[None, None, None, Some(32)]);
        let r = per_layer(&b).unwrap();
        use LayerClass::{Full, Window};
        assert_eq!(r.layers, vec![Full, Window(12), Window(1), Window(32)]);
        assert_eq!(r.reduced_entries, 100 + 12 + 1 + 32);
    }
}
