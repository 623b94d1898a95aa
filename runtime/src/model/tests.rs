#![allow(clippy::needless_range_loop)]
//! Tiny random-weight model built as GGUF bytes in memory, checked against a naive reference
//! written independently here: f64, raw GGUF weights, llama.cpp's interleaved RoPE.

use burn::backend::Flex;
use burn::tensor::Tensor;

use super::*;
use crate::cache::KvStore;

use crate::gguf::GgufWriter;
use crate::observe::{ObserveConfig, Observer};
use crate::test_model::{max_abs, rows, D, EPS, F, H, NH, NKV, THETA, V};

type B = Flex;

const L: usize = 2;

fn tiny_gguf(ctx: usize) -> GgufFile {
    crate::test_model::tiny_gguf(&crate::test_model::TinySpec {
        qk_scale: 0.4,
        random_norms: true,
        ..crate::test_model::TinySpec::small(1234, L, ctx)
    })
}

fn tiny_model(ctx: usize) -> (Model<B>, GgufFile) {
    let g = tiny_gguf(ctx);
    (Model::from_gguf(&g, &Default::default()).unwrap(), g)
}

/// Naive forward in f64 on raw GGUF weights. Returns per-position logits, the attention
/// probabilities `[layer][head][query][key]` and pre-RoPE keys `[layer][kv][pos][dim]` in
/// GGUF (interleaved) order.
struct Reference {
    logits: Vec<Vec<f64>>,
    attn: Vec<Vec<Vec<Vec<f64>>>>,
    keys: Vec<Vec<Vec<Vec<f64>>>>,
}

fn w(g: &GgufFile, name: &str) -> Vec<f64> {
    g.tensor_f32(name)
        .unwrap()
        .0
        .iter()
        .map(|&v| v as f64)
        .collect()
}

fn matvec(m: &[f64], x: &[f64], rows: usize) -> Vec<f64> {
    let cols = x.len();
    (0..rows)
        .map(|r| (0..cols).map(|c| m[r * cols + c] * x[c]).sum())
        .collect()
}

fn rms(x: &[f64], g: &[f64]) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let s = 1.0 / (ms + EPS).sqrt();
    x.iter().zip(g).map(|(v, g)| v * s * g).collect()
}

/// llama.cpp RoPE: rotate adjacent pairs (2i, 2i+1) by pos·θ^(−2i/d).
fn rope_pairs(x: &mut [f64], pos: usize) {
    for i in 0..D / 2 {
        let a = pos as f64 * THETA.powf(-2.0 * i as f64 / D as f64);
        let (x0, x1) = (x[2 * i], x[2 * i + 1]);
        x[2 * i] = x0 * a.cos() - x1 * a.sin();
        x[2 * i + 1] = x0 * a.sin() + x1 * a.cos();
    }
}

fn reference(g: &GgufFile, ids: &[u32]) -> Reference {
    let emb = w(g, "token_embd.weight");
    let mut xs: Vec<Vec<f64>> = ids
        .iter()
        .map(|&i| emb[i as usize * H..(i as usize + 1) * H].to_vec())
        .collect();
    let (mut attn_all, mut keys_all) = (Vec::new(), Vec::new());
    for l in 0..L {
        let n = |s: &str| format!("blk.{l}.{s}.weight");
        let (wq, wk, wv, wo) = (
            w(g, &n("attn_q")),
            w(g, &n("attn_k")),
            w(g, &n("attn_v")),
            w(g, &n("attn_output")),
        );
        let (an, fnorm) = (w(g, &n("attn_norm")), w(g, &n("ffn_norm")));
        let (wg, wu, wd) = (
            w(g, &n("ffn_gate")),
            w(g, &n("ffn_up")),
            w(g, &n("ffn_down")),
        );
        let hs: Vec<Vec<f64>> = xs.iter().map(|x| rms(x, &an)).collect();
        let qs: Vec<Vec<f64>> = hs.iter().map(|h| matvec(&wq, h, NH * D)).collect();
        let ks: Vec<Vec<f64>> = hs.iter().map(|h| matvec(&wk, h, NKV * D)).collect();
        let vs: Vec<Vec<f64>> = hs.iter().map(|h| matvec(&wv, h, NKV * D)).collect();
        keys_all.push(
            (0..NKV)
                .map(|kv| {
                    ks.iter()
                        .map(|k| k[kv * D..(kv + 1) * D].to_vec())
                        .collect()
                })
                .collect(),
        );
        let rot = |v: &Vec<f64>, heads: usize, pos: usize| {
            let mut v = v.clone();
            for h in 0..heads {
                rope_pairs(&mut v[h * D..(h + 1) * D], pos);
            }
            v
        };
        let qr: Vec<Vec<f64>> = qs.iter().enumerate().map(|(p, q)| rot(q, NH, p)).collect();
        let kr: Vec<Vec<f64>> = ks.iter().enumerate().map(|(p, k)| rot(k, NKV, p)).collect();
        let mut layer_attn = vec![vec![]; NH];
        let mut new_xs = Vec::new();
        for (i, x) in xs.iter().enumerate() {
            let mut o = vec![0.0; NH * D];
            for h in 0..NH {
                let kv = h / (NH / NKV);
                let s: Vec<f64> = (0..=i)
                    .map(|j| {
                        (0..D)
                            .map(|c| qr[i][h * D + c] * kr[j][kv * D + c])
                            .sum::<f64>()
                            / (D as f64).sqrt()
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
                let z: f64 = e.iter().sum();
                let p: Vec<f64> = e.iter().map(|v| v / z).collect();
                for (j, pj) in p.iter().enumerate() {
                    for c in 0..D {
                        o[h * D + c] += pj * vs[j][kv * D + c];
                    }
                }
                let mut row = p.clone();
                row.resize(ids.len(), 0.0);
                layer_attn[h].push(row);
            }
            let a = matvec(&wo, &o, H);
            let x1: Vec<f64> = x.iter().zip(&a).map(|(x, a)| x + a).collect();
            let h2 = rms(&x1, &fnorm);
            let gt = matvec(&wg, &h2, F);
            let up = matvec(&wu, &h2, F);
            let act: Vec<f64> = gt
                .iter()
                .zip(&up)
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            let f = matvec(&wd, &act, H);
            new_xs.push(x1.iter().zip(&f).map(|(x, f)| x + f).collect());
        }
        xs = new_xs;
        attn_all.push(layer_attn);
    }
    let on = w(g, "output_norm.weight");
    let logits = xs.iter().map(|x| matvec(&emb, &rms(x, &on), V)).collect();
    Reference {
        logits,
        attn: attn_all,
        keys: keys_all,
    }
}

/// The logits of every row of `ids` from a fresh cache.
fn all_rows(m: &Model<B>, ids: &[u32]) -> Vec<Vec<f32>> {
    rows(
        m.forward(ids, &mut m.new_cache(), None, Logits::All)
            .unwrap(),
    )
}

/// Prefills `ids[..prefix]`, then steps one token at a time: each step's logits are the row of
/// a whole-sequence forward to within `tol`. Returns the cache.
fn steps_equal_the_whole(m: &Model<B>, ids: &[u32], prefix: usize, tol: f32) -> KvCache<B> {
    let full = all_rows(m, ids);
    let mut cache = m.new_cache();
    m.forward(&ids[..prefix], &mut cache, None, Logits::Last)
        .unwrap();
    for (i, &id) in ids.iter().enumerate().skip(prefix) {
        let step = rows(m.forward(&[id], &mut cache, None, Logits::Last).unwrap());
        let d = max_abs(&step[0], &full[i]);
        assert!(d < tol, "position {i}: {d}");
    }
    cache
}

fn max_diff(a: &[f32], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - y).abs())
        .fold(0.0, f64::max)
}

const IDS: [u32; 9] = [3, 17, 42, 8, 8, 1, 49, 0, 23];

#[test]
fn logits_match_naive_reference_with_interleaved_rope() {
    let (mut m, g) = tiny_model(64);
    let r = reference(&g, &IDS);
    // Both attention kernels: the fused host kernel (flex) and the generic burn ops.
    for generic in [false, true] {
        m.set_generic_attention(generic);
        let mut cache = m.new_cache();
        let out = rows(m.forward(&IDS, &mut cache, None, Logits::All).unwrap());
        assert_eq!(out.len(), IDS.len());
        assert_eq!(out[0].len(), V);
        for (a, b) in out.iter().zip(&r.logits) {
            assert!(
                max_diff(a, b) < 1e-4,
                "generic {generic}: diff {}",
                max_diff(a, b)
            );
        }
    }
}

#[test]
fn both_kernels_agree_on_blocks_observation_and_column_sums() {
    let n = attention::QUERY_BLOCK + 45;
    let (mut m, _) = tiny_model(512);
    let ids: Vec<u32> = (0..n).map(|i| ((i * 11 + 2) % V) as u32).collect();
    let cfg = ObserveConfig {
        attn_rows: 5,
        column_sums: true,
        ..Default::default()
    };
    let mut runs = Vec::new();
    for generic in [false, true] {
        m.set_generic_attention(generic);
        let mut cache = m.new_cache();
        let mut obs = Observer::new(cfg.clone(), L);
        let a = rows(
            m.forward(&ids[..n - 1], &mut cache, Some(&mut obs), Logits::All)
                .unwrap(),
        );
        let b = rows(
            m.forward(&ids[n - 1..], &mut cache, Some(&mut obs), Logits::All)
                .unwrap(),
        );
        runs.push((a, b, obs));
    }
    let close = |x: &[f32], y: &[f32]| x.iter().zip(y).all(|(a, b)| (a - b).abs() < 1e-4);
    let ((a0, b0, o0), (a1, b1, o1)) = (&runs[0], &runs[1]);
    assert!(a0.iter().zip(a1).all(|(x, y)| close(x, y)));
    assert!(close(&b0[0], &b1[0]));
    for l in 0..L {
        for call in 0..2 {
            let (r0, r1) = (&o0.layers[l].attention[call], &o1.layers[l].attention[call]);
            assert_eq!(r0.query_positions, r1.query_positions);
            for h in 0..NH {
                for (x, y) in r0.probs[h].iter().zip(&r1.probs[h]) {
                    assert!(close(x, y));
                }
                assert!(close(
                    &o0.layers[l].column_sums[call].sums[h],
                    &o1.layers[l].column_sums[call].sums[h]
                ));
            }
        }
    }
}

#[test]
fn last_logits_equal_the_last_row_of_all() {
    let (m, _) = tiny_model(64);
    let all = all_rows(&m, &IDS);
    let last = rows(
        m.forward(&IDS, &mut m.new_cache(), None, Logits::Last)
            .unwrap(),
    );
    assert_eq!(last.len(), 1);
    let d: f64 = last[0]
        .iter()
        .zip(&all[8])
        .map(|(a, b)| (a - b).abs() as f64)
        .fold(0.0, f64::max);
    assert!(d < 1e-5);
}

#[test]
fn causal_mask_hides_future_tokens() {
    let (m, _) = tiny_model(64);
    let a = all_rows(&m, &IDS);
    let mut changed = IDS;
    changed[6] = 11;
    let b = all_rows(&m, &changed);
    for i in 0..6 {
        let d: f32 = max_abs(&a[i], &b[i]);
        assert!(d < 1e-5, "position {i} saw the future");
    }
    let d: f32 = max_abs(&a[6], &b[6]);
    assert!(d > 1e-3, "position 6 must change");
}

#[test]
fn decode_with_cache_equals_full_recompute() {
    let (m, _) = tiny_model(64);
    let cache = steps_equal_the_whole(&m, &IDS, 5, 1e-4);
    assert_eq!(cache.next_position, IDS.len());
    assert_eq!(cache.layers[0].len(1), IDS.len());
}

#[test]
fn blocked_prefill_equals_token_by_token() {
    // Longer than one query block, so the block-wise causal path runs.
    let n = attention::QUERY_BLOCK + 37;
    let (m, _) = tiny_model(512);
    let ids: Vec<u32> = (0..n).map(|i| ((i * 7 + 3) % V) as u32).collect();
    steps_equal_the_whole(&m, &ids, n - 3, 1e-3);
}

#[test]
fn rows_ending_at_a_position_are_the_reference_rows_before_it_in_both_kernels() {
    // Rows 3, 4, 5 (the 3 rows ending before position 6) of a 9-token prompt, as the f64
    // reference computes them, whichever kernel runs; split over two calls (tokens 0..5 and
    // 5..9) the first call records rows 3, 4 and the second row 5.
    let (mut m, g) = tiny_model(64);
    let r = reference(&g, &IDS);
    let config = ObserveConfig {
        attn_rows: 3,
        rows_end: Some(6),
        ..Default::default()
    };
    for generic in [false, true] {
        m.set_generic_attention(generic);
        let mut one = Observer::new(config.clone(), L);
        m.forward(&IDS, &mut m.new_cache(), Some(&mut one), Logits::Last)
            .unwrap();
        let mut two = Observer::new(config.clone(), L);
        let mut cache = m.new_cache();
        m.forward(&IDS[..5], &mut cache, Some(&mut two), Logits::Last)
            .unwrap();
        m.forward(&IDS[5..], &mut cache, Some(&mut two), Logits::Last)
            .unwrap();
        for l in 0..L {
            let rec = &one.layers[l].attention[0];
            assert_eq!(rec.query_positions, vec![3, 4, 5], "generic {generic}");
            let split = &two.layers[l].attention;
            assert_eq!(split[0].query_positions, vec![3, 4]);
            assert_eq!(split[1].query_positions, vec![5]);
            for h in 0..NH {
                for (i, row) in rec.probs[h].iter().enumerate() {
                    assert!(
                        max_diff(row, &r.attn[l][h][3 + i]) < 1e-5,
                        "layer {l} head {h}"
                    );
                }
                let last = &split[1].probs[h][0];
                assert!(max_diff(last, &r.attn[l][h][5]) < 1e-5);
            }
        }
    }
}

#[test]
fn observer_attention_and_keys_match_reference_and_gqa_map() {
    let (m, g) = tiny_model(64);
    let r = reference(&g, &IDS);
    let mut obs = Observer::new(
        ObserveConfig {
            attn_rows: 3,
            keys_values: true,
            ..Default::default()
        },
        L,
    );
    m.forward(&IDS, &mut m.new_cache(), Some(&mut obs), Logits::Last)
        .unwrap();
    for l in 0..L {
        let rec = &obs.layers[l].attention[0];
        assert_eq!(rec.query_positions, vec![6, 7, 8]);
        assert_eq!(rec.probs.len(), NH);
        for h in 0..NH {
            for (i, row) in rec.probs[h].iter().enumerate() {
                assert!(
                    max_diff(row, &r.attn[l][h][6 + i]) < 1e-5,
                    "layer {l} head {h}"
                );
            }
        }
        // Pre-RoPE keys come out in HF order: dim j is GGUF dim perm[j].
        let kv = &obs.layers[l].keys_values[0];
        for head in 0..NKV {
            for pos in 0..IDS.len() {
                for j in 0..D {
                    let perm = if j < D / 2 {
                        2 * j
                    } else {
                        2 * (j - D / 2) + 1
                    };
                    let got = kv.keys[(head * IDS.len() + pos) * D + j] as f64;
                    assert!((got - r.keys[l][head][pos][perm]).abs() < 1e-5);
                }
            }
        }
    }
    // Query heads 0 and 1 share KV head 0, heads 2 and 3 KV head 1: the reference uses h / 2.
}

#[test]
fn observer_off_records_nothing_and_changes_nothing() {
    let (m, _) = tiny_model(64);
    let a = all_rows(&m, &IDS);
    let mut obs = Observer::new(
        ObserveConfig {
            attn_rows: 2,
            layers: Some(vec![1]),
            ..Default::default()
        },
        L,
    );
    let b = rows(
        m.forward(&IDS, &mut m.new_cache(), Some(&mut obs), Logits::All)
            .unwrap(),
    );
    assert_eq!(a, b);
    assert!(obs.layers[0].attention.is_empty());
    assert_eq!(obs.layers[1].attention.len(), 1);
    assert!(obs.layers[1].keys_values.is_empty());
}

#[test]
fn per_head_cache_equals_uniform_when_nothing_evicted() {
    let (m, _) = tiny_model(64);
    let mut uniform = m.new_cache();
    m.forward(&IDS[..6], &mut uniform, None, Logits::Last)
        .unwrap();
    let mut per_head = uniform.clone();
    for layer in &mut per_head.layers {
        layer.to_per_head();
        assert!(matches!(layer.store(), Some(KvStore::PerHead { .. })));
    }
    let mut obs_u = Observer::new(
        ObserveConfig {
            attn_rows: 1,
            ..Default::default()
        },
        L,
    );
    let mut obs_p = Observer::new(
        ObserveConfig {
            attn_rows: 1,
            ..Default::default()
        },
        L,
    );
    for &id in &IDS[6..] {
        let a = rows(
            m.forward(&[id], &mut uniform, Some(&mut obs_u), Logits::Last)
                .unwrap(),
        );
        let b = rows(
            m.forward(&[id], &mut per_head, Some(&mut obs_p), Logits::Last)
                .unwrap(),
        );
        let d: f32 = max_abs(&a[0], &b[0]);
        assert!(d < 1e-5);
    }
    assert_eq!(obs_u.layers[1].attention, obs_p.layers[1].attention);
}

#[test]
fn retain_keeps_per_head_entries_and_positions() {
    let (m, _) = tiny_model(64);
    let mut cache = m.new_cache();
    m.forward(&IDS, &mut cache, None, Logits::Last).unwrap();
    let full_bytes = cache.bytes();
    assert_eq!(full_bytes, L * NKV * IDS.len() * D * 4 * 2);
    cache.layers[0].retain(&[vec![8, 0, 4], vec![1, 2, 3, 5, 8]]);
    assert_eq!(cache.layers[0].positions(0), &[0, 4, 8]);
    assert_eq!(cache.layers[0].positions(1), &[1, 2, 3, 5, 8]);
    assert!(matches!(
        cache.layers[0].store(),
        Some(KvStore::PerHead { .. })
    ));
    assert_eq!(cache.bytes(), full_bytes - (IDS.len() * 2 - 8) * D * 4 * 2);
    // Decoding keeps working and observes only the kept keys (3 + 1 new for KV head 0).
    let mut obs = Observer::new(
        ObserveConfig {
            attn_rows: 1,
            layers: Some(vec![0]),
            ..Default::default()
        },
        L,
    );
    m.forward(&[5], &mut cache, Some(&mut obs), Logits::Last)
        .unwrap();
    let rec = &obs.layers[0].attention[0];
    assert_eq!(rec.probs[0][0].len(), 4);
    assert_eq!(rec.probs[3][0].len(), 6);
    assert_eq!(rec.key_positions[0], vec![0, 4, 8, 9]);
    let s: f32 = rec.probs[1][0].iter().sum();
    assert!((s - 1.0).abs() < 1e-5);
}

#[test]
fn rejects_out_of_range_requests() {
    let (m, _) = tiny_model(8);
    let mut cache = m.new_cache();
    let err = m
        .forward(&[V as u32], &mut cache, None, Logits::Last)
        .unwrap_err();
    assert!(err.to_string().contains("outside the vocabulary"));
    let err = m
        .forward(&[1; 9], &mut cache, None, Logits::Last)
        .unwrap_err();
    assert!(err.to_string().contains("exceed the model's context of 8"));
    assert!(m.forward(&[], &mut cache, None, Logits::Last).is_err());
}

#[test]
fn rejects_wrong_tensor_shape() {
    let g = tiny_gguf(16);
    let mut bytes = GgufWriter::new();
    for (k, v) in &g.metadata {
        bytes = bytes.meta(k, v.clone());
    }
    for t in &g.tensors {
        let (data, shape) = g.tensor_f32(&t.name).unwrap();
        let shape = if t.name == "blk.1.attn_k.weight" {
            vec![shape[0] / 2, shape[1] * 2]
        } else {
            shape
        };
        bytes = bytes.tensor_f32(&t.name, &shape, &data);
    }
    let g = GgufFile::from_bytes(bytes.to_bytes()).unwrap();
    let err = Model::<B>::from_gguf(&g, &Default::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("blk.1.attn_k.weight: expected shape [16, 32]"),
        "{err}"
    );
}

#[test]
fn column_sums_equal_the_reference_columns_in_both_storages() {
    // Longer than one query block so the sums are accumulated block by block.
    let n = attention::QUERY_BLOCK + 20;
    let (m, g) = tiny_model(512);
    let ids: Vec<u32> = (0..n).map(|i| ((i * 5 + 1) % V) as u32).collect();
    let r = reference(&g, &ids);
    let cfg = ObserveConfig {
        column_sums: true,
        ..Default::default()
    };
    let mut obs = Observer::new(cfg.clone(), L);
    let mut cache = m.new_cache();
    m.forward(&ids, &mut cache, Some(&mut obs), Logits::Last)
        .unwrap();
    for l in 0..L {
        let sums = &obs.layers[l].column_sums[0].sums;
        assert_eq!(sums.len(), NH);
        for h in 0..NH {
            let want: Vec<f64> = (0..n)
                .map(|j| r.attn[l][h].iter().map(|row| row[j]).sum())
                .collect();
            assert!(max_diff(&sums[h], &want) < 1e-3, "layer {l} head {h}");
        }
    }
    // A decode step's column sums are its single attention row, in per-head storage too.
    for layer in &mut cache.layers {
        layer.to_per_head();
    }
    let mut obs = Observer::new(
        ObserveConfig {
            attn_rows: 1,
            ..cfg
        },
        L,
    );
    m.forward(&[7], &mut cache, Some(&mut obs), Logits::Last)
        .unwrap();
    let o = &obs.layers[1];
    assert_eq!(
        o.column_sums[0].sums,
        o.attention[0]
            .probs
            .iter()
            .map(|r| r[0].clone())
            .collect::<Vec<_>>()
    );
}

/// `m` with its query heads renumbered so that new head `h` is old head `pi[h]`, under the
/// query→KV map `q_to_kv` (the new heads' KV heads).
fn renumber_query_heads(m: &Model<B>, pi: &[usize], q_to_kv: Vec<usize>) -> Model<B> {
    use super::linear::Linear;
    use burn::tensor::{Int, TensorData};
    let device = Default::default();
    let index = |v: Vec<usize>| {
        let v: Vec<i64> = v.into_iter().map(|i| i as i64).collect();
        let n = v.len();
        Tensor::<B, 1, Int>::from_data(TensorData::new(v, [n]), &device)
    };
    let head_rows: Vec<usize> = pi.iter().flat_map(|&p| p * D..(p + 1) * D).collect();
    let qkv_cols: Vec<usize> = head_rows
        .iter()
        .copied()
        .chain(NH * D..(NH + 2 * NKV) * D)
        .collect();
    let mut config = m.config.clone();
    config.geometry.q_to_kv = q_to_kv;
    let mut tr = m.transformer.clone();
    for block in &mut tr.blocks {
        let a = &mut block.attention;
        let (wqkv, wo) = (a.wqkv.to_dense(&device), a.wo.to_dense(&device));
        a.wqkv = Linear::dense(wqkv.select(1, index(qkv_cols.clone())));
        a.wo = Linear::dense(wo.select(0, index(head_rows.clone())));
    }
    Model::from_parts(config, tr, &device)
}

#[test]
fn an_interleaved_query_to_kv_map_is_honoured() {
    // Old heads 0, 1 read KV 0 and 2, 3 read KV 1. Renumbered as 0, 2, 1, 3, the new heads 0, 2
    // read KV 0 and 1, 3 read KV 1: the map [0, 1, 0, 1]. Same model, so the same logits; the
    // observation lists the new heads with the KV head each reads.
    let (mut old, _) = tiny_model(64);
    let pi = [0, 2, 1, 3];
    let mut new = renumber_query_heads(&old, &pi, vec![0, 1, 0, 1]);
    let observe = ObserveConfig {
        attn_rows: 2,
        column_sums: true,
        ..Default::default()
    };
    for generic in [false, true] {
        old.set_generic_attention(generic);
        new.set_generic_attention(generic);
        let run = |m: &Model<B>| {
            let mut obs = Observer::new(observe.clone(), L);
            let logits = m
                .forward(&IDS, &mut m.new_cache(), Some(&mut obs), Logits::All)
                .unwrap();
            (rows(logits), obs)
        };
        let ((a, obs_a), (b, obs_b)) = (run(&old), run(&new));
        for (ra, rb) in a.iter().zip(&b) {
            let diff = max_abs(ra, rb);
            assert!(diff < 1e-5, "generic {generic}: {diff}");
        }
        for l in 0..L {
            let (ra, rb) = (&obs_a.layers[l].attention[0], &obs_b.layers[l].attention[0]);
            assert_eq!(ra.kv_of, vec![0, 0, 1, 1]);
            assert_eq!(rb.kv_of, vec![0, 1, 0, 1]);
            let (ca, cb) = (
                &obs_a.layers[l].column_sums[0],
                &obs_b.layers[l].column_sums[0],
            );
            assert_eq!(cb.kv_of, vec![0, 1, 0, 1]);
            for (h, &p) in pi.iter().enumerate() {
                for (x, y) in rb.probs[h]
                    .iter()
                    .flatten()
                    .zip(ra.probs[p].iter().flatten())
                {
                    assert!((x - y).abs() < 1e-6, "generic {generic} l{l} h{h}");
                }
                for (x, y) in cb.sums[h].iter().zip(&ca.sums[p]) {
                    assert!((x - y).abs() < 1e-5, "generic {generic} l{l} h{h}");
                }
            }
        }
    }
}

#[test]
fn quantised_storage_runs_as_the_f32_weights() {
    // The same file held both ways: the projections whose rows are whole steps of 32 stay in
    // the file's blocks (F32 rows here), multiplied on the host (tiled for the 12-token
    // prefill, fused dot products for the decode steps); the logits agree with burn's matmul.
    let g = tiny_gguf(64);
    let device = Default::default();
    let dense = Model::<B>::from_gguf_with(&g, &device, WeightStorage::Dense).unwrap();
    let quant = Model::<B>::from_gguf_with(&g, &device, WeightStorage::Quantised).unwrap();
    assert!(dense.transformer.is_dense());
    assert!(
        !quant.transformer.is_dense() && !quant.transformer.blocks[0].attention.wqkv.is_dense()
    );
    let ids: Vec<u32> = (0..12).map(|i| (i * 7 % V) as u32).collect();
    let (mut cd, mut cq) = (dense.new_cache(), quant.new_cache());
    let mut run = |ids: &[u32]| {
        let a = dense.forward(ids, &mut cd, None, Logits::All).unwrap();
        let b = quant.forward(ids, &mut cq, None, Logits::All).unwrap();
        let (a, b): (Vec<f32>, Vec<f32>) = (
            a.into_data().to_vec().unwrap(),
            b.into_data().to_vec().unwrap(),
        );
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-5, "logits differ by {worst}");
    };
    run(&ids);
    for &t in &[3u32, 9, 27] {
        run(&[t]);
    }
}
