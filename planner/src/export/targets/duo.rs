//! `duo`: DuoAttention's pattern folder — `full_attention_heads.tsv` (rows = layers, columns =
//! KV heads, gates in [0, 1]: KV-head importance from the HeadKV scores, the largest 1) and
//! `config.json` (`sink_size`, `recent_size`, read by `load_attn_pattern`; `sparsity` and
//! `head_compression_ratio`, which its readers take as arguments).
//!
//! The gates only rank heads; what a budget becomes is the share of heads kept full. At equal
//! bytes with the plan: a streaming head holds `s = sink + recent` entries, a full head `n`, so
//! `K = ⌊(T − N·s) / (n − s)⌋` of the `N` KV heads fit beside the others in the plan's `T`
//! entries (`0 ≤ K ≤ N`), with `recent` = half the per-head target minus the sinks (at least
//! 1): half of a head's budget streams, the rest pays for full heads. DuoAttention's
//! `sparsify_attention_heads(gates, sparsity=S)` keeps the heads at or above
//! `np.quantile(gates, S)` (ties broken by noise of 1e−6); `S = (N − K − ½)/(N − 1)` puts that
//! quantile between the `K`-th and `(K+1)`-th largest gate, so exactly the `K` largest stay
//! full (`S = 1` for `K = 0`, `0` for `K = N`). kvpress `DuoAttentionPress` takes the share of
//! streaming heads, `head_compression_ratio = 1 − K/N`.

use super::super::tsv;
use crate::export::capability::{Arch, Capability, Engine, Refusal, Source};
use crate::export::manifest::{file, json};
use crate::export::score_set::scores;
use crate::export::target::{About, BudgetsOf, Context, ExportTarget, Written};
use crate::methods::streaming::DEFAULT_SINKS;
use crate::{Method, Result, StreamingSection};

const DUO: &[Source] = &[Source {
    repo: "mit-han-lab/duo-attention",
    commit: "fe93c314ae87306ef6629dc16713250b4718ffe7",
    file: "duo_attn/utils.py: load_attn_pattern, sparsify_attention_heads (np.quantile)",
}];

/// The `duo` target.
pub struct Duo;

/// Full heads `K` of `heads` that fit in `total` entries at context `n` beside streaming heads
/// of `stream` entries (module header).
pub fn full_heads(total: f64, heads: usize, n: usize, stream: usize) -> usize {
    if stream >= n {
        return heads;
    }
    let room = total - (heads * stream) as f64;
    ((room / (n - stream) as f64).floor().max(0.0) as usize).min(heads)
}

/// DuoAttention's `sparsity` that keeps exactly `k` of `heads` full (module header).
pub fn sparsity(k: usize, heads: usize) -> f64 {
    if k == 0 {
        1.0
    } else if k >= heads {
        0.0
    } else {
        ((heads - k) as f64 - 0.5) / (heads - 1) as f64
    }
}

/// Gives every head of a windowed layer gate 1 and halves the global layers' gates, so that any
/// quantile keeps the windowed heads first; returns how many heads that is.
fn local_rows_full(gates: &mut [Vec<f64>], g: &crate::Geometry) -> usize {
    if g.global_layers().len() == g.layers {
        return 0;
    }
    let mut local = 0;
    for (l, row) in gates.iter_mut().enumerate() {
        if g.is_windowed(l) {
            row.fill(1.0);
            local += row.len();
        } else {
            row.iter_mut().for_each(|x| *x *= 0.5);
        }
    }
    local
}

impl ExportTarget for Duo {
    fn about(&self) -> About {
        About {
            name: "duo",
            files: &["config.json", "full_attention_heads.tsv"],
            holds: "sink_size, recent_size, sparsity, head_compression_ratio; KV-head gates",
            reader: "DuoAttention / kvpress DuoAttentionPress: config.json + \
                     full_attention_heads.tsv",
        }
    }

    /// duo_attn's runner patches Llama and Mistral; kvpress's `DuoAttentionPress` reads the
    /// pattern on any architecture.
    fn capability(&self, arch: Arch) -> std::result::Result<Capability, Refusal> {
        let note = match arch {
            Arch::Llama => {
                "duo_attn's runner (Llama, Mistral) and kvpress DuoAttentionPress read the pattern"
            }
            _ => {
                "duo_attn's own runner patches Llama and Mistral only: load the pattern with \
                 kvpress DuoAttentionPress"
            }
        };
        Ok(Capability::package(Engine::DuoAttention, arch, note, DUO))
    }

    fn budgets_of(&self) -> BudgetsOf {
        BudgetsOf::ScoreSet
    }

    fn write(&self, cx: &Context<'_>, cap: &Capability) -> Result<Written> {
        let g = &cx.plan.model.geometry;
        let section = scores(cx.plan, cx.scores)?;
        let mut gates = tsv::kv_head_gates(&section.scores, g, section.temperature);
        let sinks = cx
            .plan
            .sections
            .get::<StreamingSection>(Method::Streaming)
            .map_or(DEFAULT_SINKS, |s| s.sinks);
        let per_head = cx.target.per_head(cx.n);
        let recent = (per_head / 2).saturating_sub(sinks).max(1);
        let global = g.global_layers();
        let heads = global.len() * g.kv_heads;
        let k = full_heads((per_head * heads) as f64, heads, cx.n, sinks + recent);
        // Both readers apply the pattern to every row: a windowed layer's heads are kept full
        // (gate 1, above every global gate, halved), so their own window stays theirs.
        let local = local_rows_full(&mut gates, g);
        let (all, kept) = (g.layers * g.kv_heads, k + local);
        let s = sparsity(kept, all);
        let ratio = 1.0 - kept as f64 / all.max(1) as f64;
        let config = serde_json::json!({
            "sink_size": sinks,
            "recent_size": recent,
            "sparsity": s,
            "head_compression_ratio": ratio,
        });
        let mut notes = vec![
            format!(
                "gates: KV-head importance from the {} scores, the largest 1; {k} of {heads} \
                 KV heads full and the others {sinks} sinks + {recent} recent keep the plan's \
                 {per_head} entries per head at {} tokens",
                cx.scores.name(),
                cx.n
            ),
            format!(
                "duo_attn: sparsify_attention_heads(gates, sparsity={s}); kvpress: \
                 DuoAttentionPress(head_compression_ratio={ratio}); {}",
                cap.note
            ),
        ];
        if local > 0 {
            notes.push(format!(
                "the {} windowed layers' {local} KV heads have gate 1 and stay full, so each \
                 keeps the model's own window; the {heads} heads of the global layers carry \
                 their gates halved (below 1), so the pattern streams global heads only",
                g.layers - g.global_layers().len()
            ));
        }
        Ok(Written {
            files: vec![
                file("config.json", json(&config)?),
                file("full_attention_heads.tsv", tsv::to_tsv(&gates).into_bytes()),
            ],
            notes,
            reduction: None,
            scores: Some(cx.scores.name()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_heads_and_sparsity_by_hand() {
        // 90 heads, 128 per head at n = 4096, streaming heads 64: (11 520 − 5 760) / 4 032
        // = 1.43 → 1 full head. Sparsity (90 − 1 − ½)/89 = 88.5/89.
        assert_eq!(full_heads(11_520.0, 90, 4096, 64), 1);
        assert!((sparsity(1, 90) - 88.5 / 89.0).abs() < 1e-15);
        assert_eq!((sparsity(0, 90), sparsity(90, 90)), (1.0, 0.0));
        // Budget 512 at n = 1024, streaming 252: (512·4 − 4·252)/(1024 − 252) = 1040/772 → 1.
        assert_eq!(full_heads(2048.0, 4, 1024, 252), 1);
        // A streaming head as large as the context: every head full.
        assert_eq!(full_heads(10.0, 4, 100, 100), 4);
    }

    #[test]
    fn the_quantile_keeps_exactly_k_heads() {
        // np.quantile with linear interpolation on 5 sorted gates at S = (5 − 2 − ½)/4 = 0.625:
        // position 2.5, between the 3rd and 4th gates: the 2 largest are at or above it.
        let gates = [0.1, 0.2, 0.3, 0.7, 1.0];
        let s = sparsity(2, 5);
        let pos = s * 4.0;
        let (i, f) = (pos.floor() as usize, pos.fract());
        let q = gates[i] + f * (gates[i + 1] - gates[i]);
        assert_eq!(gates.iter().filter(|&&x| x >= q).count(), 2);
    }
}
