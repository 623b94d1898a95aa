//! Times the pieces of one layer's forward at a given length (developer aid for `kvplan bench`).
use burn::backend::Flex;
use burn::nn::RmsNormConfig;
use burn::tensor::{activation::silu, Distribution, Int, Tensor, TensorData};
use kvplan_runtime::model::rope::Rope;
use std::time::Instant;
type B = Flex;
fn time<T, F: FnMut() -> T>(name: &str, reps: usize, mut f: F) {
    f();
    let s = Instant::now();
    for _ in 0..reps {
        f();
    }
    println!(
        "{name:>28}: {:8.2} ms",
        s.elapsed().as_secs_f64() * 1e3 / reps as f64
    );
}
fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(512);
    let d = Default::default();
    let x = Tensor::<B, 2>::random([n, 576], Distribution::Default, &d);
    let norm = RmsNormConfig::new(576).init::<B>(&d);
    let wqkv = Tensor::<B, 2>::random([576, 960], Distribution::Default, &d);
    let wo = Tensor::<B, 2>::random([576, 576], Distribution::Default, &d);
    let wgu = Tensor::<B, 2>::random([576, 3072], Distribution::Default, &d);
    let wd = Tensor::<B, 2>::random([1536, 576], Distribution::Default, &d);
    let rope = Rope::<B>::new(64, 1e5, 8192, &d);
    let pos: Vec<i64> = (0..n as i64).collect();
    let pos = Tensor::<B, 1, Int>::from_data(TensorData::new(pos, [n]), &d);
    time("rmsnorm", 10, || norm.forward(x.clone()).into_data());
    time("matmul qkv", 10, || {
        x.clone().matmul(wqkv.clone()).into_data()
    });
    let qkv = x.clone().matmul(wqkv.clone());
    time("split q (narrow+reshape+swap)", 10, || {
        qkv.clone()
            .narrow(1, 0, 576)
            .reshape([n, 9, 64])
            .swap_dims(0, 1)
            .into_data()
    });
    let q = qkv
        .clone()
        .narrow(1, 0, 576)
        .reshape([n, 9, 64])
        .swap_dims(0, 1);
    time("rope q", 10, || {
        rope.apply(0, q.clone(), pos.clone()).into_data()
    });
    let qc = Tensor::<B, 3>::random([9, n, 64], Distribution::Default, &d);
    time("rope q contiguous", 10, || {
        rope.apply(0, qc.clone(), pos.clone()).into_data()
    });
    time("mul_scalar+reshape", 10, || {
        qc.clone()
            .mul_scalar(0.125)
            .reshape([3, 3, n, 64])
            .into_data()
    });
    time("out swap+reshape", 10, || {
        qc.clone().swap_dims(0, 1).reshape([n, 576]).into_data()
    });
    time("matmul wo", 10, || x.clone().matmul(wo.clone()).into_data());
    time("matmul gate_up", 10, || {
        x.clone().matmul(wgu.clone()).into_data()
    });
    let gu = x.clone().matmul(wgu.clone());
    time("silu*up", 10, || {
        (silu(gu.clone().narrow(1, 0, 1536)) * gu.clone().narrow(1, 1536, 1536)).into_data()
    });
    let h = Tensor::<B, 2>::random([n, 1536], Distribution::Default, &d);
    time("matmul down", 10, || {
        h.clone().matmul(wd.clone()).into_data()
    });
    time("residual add", 10, || (x.clone() + x.clone()).into_data());
    kernel_time(n);
    time("into_data q (host copy)", 10, || {
        qc.clone().into_data().iter::<f32>().collect::<Vec<f32>>()
    });
}

#[allow(dead_code)]
fn kernel_time(n: usize) {
    use kvplan_runtime::model::host_attention::{attend, Dims};
    let q: Vec<f32> = (0..9 * n * 64)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
        .collect();
    let k: Vec<f32> = (0..3 * n * 64)
        .map(|i| ((i * 104729) % 1000) as f32 / 1000.0)
        .collect();
    let dims = Dims {
        kv_heads: 3,
        group: 3,
        t: n,
        keys: n,
        head_dim: 64,
        window: None,
        softcap: None,
    };
    time(&format!("host kernel n={n}"), 3, || {
        attend(&q, &k, &k, dims, 0..0, false)
    });
}
