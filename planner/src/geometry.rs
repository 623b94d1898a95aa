//! Model identity and attention geometry: layers, query heads, KV heads, head_dim and the
//! query→KV head map (grouped-query attention).
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
}

impl Geometry {
    /// A geometry with the default GQA map `h → h / (q_heads / kv_heads)`.
    pub fn new(layers: usize, q_heads: usize, kv_heads: usize, head_dim: usize) -> Result<Self> {
        if kv_heads == 0 || q_heads % kv_heads != 0 {
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
        };
        g.validate("geometry")?;
        Ok(g)
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
        if self.q_heads % self.kv_heads != 0 {
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
        Ok(())
    }
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
}
