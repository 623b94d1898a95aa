//! Model identity and attention geometry: layers, query heads, KV heads, head_dim, the
//! query→KV head map (grouped-query attention) and each layer's attention span.
//!
//! `layer_windows[l]` is `null` for a layer that attends globally (over the whole context) and
//! `W` for one that attends over a sliding window of the last `W` tokens (Gemma 3's local
//! layers). A windowed layer never needs more than `min(W, n)` entries per KV head at context `n`
//! ([`Geometry::span`]): that is its FullKV size, and every method holds exactly that there.
//!
//! The GQA map default is the Llama one: query head `h` reads KV head `h / (q_heads / kv_heads)`
//! (SmolLM2: 9 query heads, 3 KV heads, so heads 0–2 → 0, 3–5 → 1, 6–8 → 2).

use crate::validate;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// Attention geometry of a model.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Geometry {
    /// Number of transformer layers.
    pub layers: usize,
    /// Query heads per layer.
    pub q_heads: usize,
    /// KV heads per layer (what the cache stores).
    pub kv_heads: usize,
    /// Dimension of one head.
    pub head_dim: usize,
    /// `q_to_kv[h]` is the KV head that query head `h` reads.
    pub q_to_kv: Vec<usize>,
    /// Attention span of each layer: `None` (JSON `null`) attends over the whole context,
    /// `Some(W)` over a sliding window of the last `W` tokens (W ≥ 1). One per layer.
    pub layer_windows: Vec<Option<usize>>,
}

impl Geometry {
    /// A geometry with the default GQA map `h → h / (q_heads / kv_heads)`, every layer global
    /// (see [`Geometry::with_windows`]).
    pub fn new(layers: usize, q_heads: usize, kv_heads: usize, head_dim: usize) -> Result<Self> {
        if kv_heads == 0 || !q_heads.is_multiple_of(kv_heads) {
            return Err(Error::invalid(
                "geometry.kv_heads",
                format!("a divisor of q_heads = {q_heads}"),
                kv_heads,
            ));
        }
        let group = q_heads / kv_heads;
        let g = Geometry {
            layers,
            q_heads,
            kv_heads,
            head_dim,
            q_to_kv: (0..q_heads).map(|h| h / group).collect(),
            layer_windows: vec![None; layers],
        };
        g.validate("geometry")?;
        Ok(g)
    }

    /// The same geometry with each layer's attention span (`None`: global; `Some(W)`: a sliding
    /// window of `W` tokens), validated: one per layer, every window at least 1.
    pub fn with_windows(mut self, layer_windows: Vec<Option<usize>>) -> Result<Self> {
        self.layer_windows = layer_windows;
        self.validate("geometry")?;
        Ok(self)
    }

    /// The sliding window of `layer`; `None` for a global layer.
    pub fn window(&self, layer: usize) -> Option<usize> {
        self.layer_windows.get(layer).copied().flatten()
    }

    /// Whether `layer` attends over a sliding window.
    pub fn is_windowed(&self, layer: usize) -> bool {
        self.window(layer).is_some()
    }

    /// The layers that attend globally, in increasing order: the only ones a method budgets.
    pub fn global_layers(&self) -> Vec<usize> {
        (0..self.layers).filter(|&l| !self.is_windowed(l)).collect()
    }

    /// Entries one KV head of `layer` needs at context `n`: `min(W, n)` for a window of `W`,
    /// `n` for a global layer.
    pub fn span(&self, layer: usize, n: usize) -> usize {
        self.window(layer).map_or(n, |w| w.min(n))
    }

    /// A full `[layer][kv_head]` grid from one row per global layer (`global_rows[i]` for the
    /// `i`-th global layer): windowed layers get their span at context `n` in every KV head.
    pub fn scatter_global(&self, global_rows: Vec<Vec<usize>>, n: usize) -> Vec<Vec<usize>> {
        let mut rows = global_rows.into_iter();
        (0..self.layers)
            .map(|l| match self.window(l) {
                Some(_) => vec![self.span(l, n); self.kv_heads],
                None => rows.next().unwrap_or_else(|| vec![n; self.kv_heads]),
            })
            .collect()
    }

    /// Query heads per KV head.
    pub fn group_size(&self) -> usize {
        self.q_heads / self.kv_heads.max(1)
    }

    /// The KV head that query head `q` reads.
    pub fn kv_of(&self, q: usize) -> usize {
        self.q_to_kv[q]
    }

    /// The query heads that read KV head `kv`, in increasing order.
    pub fn q_heads_of(&self, kv: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.q_heads).filter(move |&h| self.q_to_kv[h] == kv)
    }

    /// Checks the geometry; `path` is the JSON path of this object.
    pub fn validate(&self, path: &str) -> Result<()> {
        validate::at_least(&format!("{path}.layers"), self.layers, 1)?;
        validate::at_least(&format!("{path}.q_heads"), self.q_heads, 1)?;
        validate::at_least(&format!("{path}.kv_heads"), self.kv_heads, 1)?;
        validate::at_least(&format!("{path}.head_dim"), self.head_dim, 1)?;
        if !self.q_heads.is_multiple_of(self.kv_heads) {
            return Err(Error::invalid(
                format!("{path}.kv_heads"),
                format!("a divisor of q_heads = {}", self.q_heads),
                self.kv_heads,
            ));
        }
        validate::len(
            &format!("{path}.q_to_kv"),
            self.q_to_kv.len(),
            self.q_heads,
            "one per query head",
        )?;
        for (h, &kv) in self.q_to_kv.iter().enumerate() {
            if kv >= self.kv_heads {
                return Err(Error::invalid(
                    format!("{path}.q_to_kv[{h}]"),
                    format!("a KV head below {}", self.kv_heads),
                    kv,
                ));
            }
        }
        self.validate_windows(path)?;
        let group = self.group_size();
        for kv in 0..self.kv_heads {
            let n = self.q_heads_of(kv).count();
            if n != group {
                return Err(Error::invalid(
                    format!("{path}.q_to_kv"),
                    format!("{group} query heads reading KV head {kv}"),
                    n,
                ));
            }
        }
        Ok(())
    }

    fn validate_windows(&self, path: &str) -> Result<()> {
        validate::len(
            &format!("{path}.layer_windows"),
            self.layer_windows.len(),
            self.layers,
            "one per layer: null for global attention or a window W >= 1",
        )?;
        for (l, w) in self.layer_windows.iter().enumerate() {
            if *w == Some(0) {
                return Err(Error::invalid(
                    format!("{path}.layer_windows[{l}]"),
                    "null (global attention) or a window of at least 1 token",
                    0,
                ));
            }
        }
        Ok(())
    }
}

/// Who the plan or profile is for: name, architecture, GGUF file hash and geometry.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ModelIdentity {
    /// Model name, e.g. `SmolLM2-135M-Instruct`.
    pub name: String,
    /// GGUF `general.architecture`, e.g. `llama`.
    pub architecture: String,
    /// SHA-256 of the GGUF file, 64 lowercase hex digits.
    pub gguf_sha256: String,
    /// Attention geometry.
    pub geometry: Geometry,
}

impl ModelIdentity {
    /// Checks the identity; `path` is the JSON path of this object.
    pub fn validate(&self, path: &str) -> Result<()> {
        if self.name.is_empty() {
            return Err(Error::invalid(format!("{path}.name"), "a name", "\"\""));
        }
        if self.architecture.is_empty() {
            return Err(Error::invalid(
                format!("{path}.architecture"),
                "an architecture",
                "\"\"",
            ));
        }
        let hex = self.gguf_sha256.len() == 64
            && self
                .gguf_sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !hex {
            return Err(Error::invalid(
                format!("{path}.gguf_sha256"),
                "64 lowercase hex digits",
                format!("{:?}", self.gguf_sha256),
            ));
        }
        self.geometry.validate(&format!("{path}.geometry"))
    }

    /// Checks that `self` (read from a plan or profile) is for `model` (the model in use);
    /// the error names the first differing field, with the model's value as the expected one.
    pub fn check_matches(&self, model: &ModelIdentity, path: &str) -> Result<()> {
        let mismatch = |field: &str, expected: String, found: String| {
            Err(Error::invalid(
                format!("{path}.{field}"),
                format!("{expected} (the model in use)"),
                found,
            ))
        };
        if self.gguf_sha256 != model.gguf_sha256 {
            return mismatch(
                "gguf_sha256",
                model.gguf_sha256.clone(),
                self.gguf_sha256.clone(),
            );
        }
        if self.architecture != model.architecture {
            return mismatch(
                "architecture",
                model.architecture.clone(),
                self.architecture.clone(),
            );
        }
        let (a, b) = (&self.geometry, &model.geometry);
        let fields = [
            ("layers", a.layers, b.layers),
            ("q_heads", a.q_heads, b.q_heads),
            ("kv_heads", a.kv_heads, b.kv_heads),
            ("head_dim", a.head_dim, b.head_dim),
        ];
        for (field, found, expected) in fields {
            if found != expected {
                return mismatch(
                    &format!("geometry.{field}"),
                    expected.to_string(),
                    found.to_string(),
                );
            }
        }
        if a.q_to_kv != b.q_to_kv {
            return mismatch(
                "geometry.q_to_kv",
                format!("{:?}", b.q_to_kv),
                format!("{:?}", a.q_to_kv),
            );
        }
        if a.layer_windows != b.layer_windows {
            return mismatch(
                "geometry.layer_windows",
                windows_text(&b.layer_windows),
                windows_text(&a.layer_windows),
            );
        }
        Ok(())
    }
}

/// `[null, 512, …]`, as the JSON writes it.
fn windows_text(w: &[Option<usize>]) -> String {
    let items: Vec<String> = w
        .iter()
        .map(|x| x.map_or_else(|| String::from("null"), |w| w.to_string()))
        .collect();
    format!("[{}]", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_gqa_map_groups_consecutive_query_heads() {
        // SmolLM2: 9 query heads, 3 KV heads, group 3: h → h / 3.
        let g = Geometry::new(30, 9, 3, 64).ok();
        let map = g.as_ref().map(|g| g.q_to_kv.clone());
        assert_eq!(map, Some(vec![0, 0, 0, 1, 1, 1, 2, 2, 2]));
        let of_1: Vec<usize> = g.iter().flat_map(|g| g.q_heads_of(1)).collect();
        assert_eq!(of_1, vec![3, 4, 5]);
    }

    #[test]
    fn rejects_kv_heads_not_dividing_q_heads() {
        let err = Geometry::new(2, 9, 2, 64).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("geometry.kv_heads: expected a divisor of q_heads = 9, found 2")
        );
    }

    #[test]
    fn rejects_unbalanced_map() {
        let mut g = Geometry::new(2, 4, 2, 8).unwrap_or_else(|e| panic!("{e}"));
        g.q_to_kv = vec![0, 0, 0, 1];
        let err = g.validate("model.geometry").err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("model.geometry.q_to_kv: expected 2 query heads reading KV head 0, found 3")
        );
        g.q_to_kv = vec![0, 0, 1, 2];
        let err = g.validate("g").err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("g.q_to_kv[3]: expected a KV head below 2, found 2")
        );
    }

    /// 4 layers, 2 query heads on 1 KV head; layers 0 and 2 windowed (W = 512).
    fn windowed() -> Geometry {
        Geometry::new(4, 2, 1, 8)
            .and_then(|g| g.with_windows(vec![Some(512), None, Some(512), None]))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn spans_and_global_layers() {
        let g = windowed();
        assert_eq!(g.global_layers(), vec![1, 3]);
        // At n = 300 a window of 512 holds the whole prompt; at n = 2000, its 512 tokens.
        assert_eq!(
            (g.span(0, 300), g.span(0, 2000), g.span(1, 2000)),
            (300, 512, 2000)
        );
        assert_eq!(
            g.scatter_global(vec![vec![7], vec![9]], 2000),
            vec![vec![512], vec![7], vec![512], vec![9]]
        );
    }

    #[test]
    fn windows_are_checked_and_compared() {
        let err = |w: Vec<Option<usize>>| {
            Geometry::new(2, 2, 1, 8)
                .and_then(|g| g.with_windows(w))
                .err()
                .map(|e| e.to_string())
        };
        assert_eq!(
            err(vec![None]).as_deref(),
            Some(
                "geometry.layer_windows: expected 2 entries (one per layer: null for global \
                 attention or a window W >= 1), found 1 entries"
            )
        );
        assert_eq!(
            err(vec![None, Some(0)]).as_deref(),
            Some(
                "geometry.layer_windows[1]: expected null (global attention) or a window of at \
                 least 1 token, found 0"
            )
        );
        let model = ModelIdentity {
            name: "m".into(),
            architecture: "gemma3".into(),
            gguf_sha256: "0".repeat(64),
            geometry: windowed(),
        };
        let mut plan = model.clone();
        plan.geometry.layer_windows[2] = None;
        let e = plan
            .check_matches(&model, "model")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                "model.geometry.layer_windows: expected [512, null, 512, null] (the model in \
                 use), found [512, null, null, null]"
            )
        );
    }
}
