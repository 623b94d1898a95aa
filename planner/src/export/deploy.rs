//! A budget from a deployment target (`kvplan export … --memory BYTES --context-len L
//! [--batch N]`): the largest per-head budget `b` (entries per KV head, `Target::Tokens(b)`)
//! whose cache, as the target allocates it, fits in `BYTES` for `N` sequences of `L` tokens.
//!
//! Bytes at budget `b` = `N · slots(b) · KV heads · head_dim · 2 (K and V) · bytes per element`,
//! where `slots(b)` is the token slots over the layers per KV head: for a window format the
//! engine's blocks **at admission** ([`super::blocks`] over the reduction the capability table
//! names: what the engine needs free to take a request, at least what it holds later), the
//! plan's entries for the others. `slots` grows with `b`, so the largest fitting `b` is found by
//! bisection over `1..=L`.

use super::blocks;
use super::capability::Capability;
use super::classes::{self, LayerBudgets};
use super::target::Context;
use crate::{Error, Result, Target};

/// A deployment: memory for the KV cache, sequences served at once, bytes per number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memory {
    pub bytes: u64,
    pub batch: usize,
    pub bytes_per_element: usize,
}

/// Token slots per KV head over the layers at budget `b` (module header).
fn slots(cx: &Context<'_>, cap: &Capability, b: usize) -> Result<usize> {
    let budgets = LayerBudgets::of(cx.plan, cx.method, cx.n, Target::Tokens(b))?;
    match cap.layers {
        Some(layers) => {
            let r = classes::reduce(layers, &budgets)?;
            let block = cx.block_size.unwrap_or(cap.block_size);
            let serving = blocks::Serving::default();
            Ok(blocks::total_slots(cap.blocks, &r.layers, cx.n, block, &serving).admission)
        }
        None => Ok(budgets.budgets.iter().sum::<f64>().ceil() as usize),
    }
}

/// Bytes of the cache at budget `b`.
fn bytes(cx: &Context<'_>, cap: &Capability, m: &Memory, b: usize) -> Result<u64> {
    let per_slot = blocks::slot_bytes(&cx.plan.model.geometry, m.bytes_per_element);
    Ok(m.batch as u64 * slots(cx, cap, b)? as u64 * per_slot)
}

/// The largest budget that fits `m`, and the note that says what was chosen.
pub fn fit(cx: &Context<'_>, cap: &Capability, m: &Memory) -> Result<(Target, String)> {
    if m.batch == 0 || m.bytes_per_element == 0 {
        return Err(Error::invalid(
            "--batch",
            "at least 1 sequence of at least 1 byte",
            0,
        ));
    }
    // The smallest budget the method's rule can give (HeadKV's must exceed its window).
    let floor = (1..=cx.n)
        .find(|&b| bytes(cx, cap, m, b).is_ok())
        .ok_or_else(|| {
            bytes(cx, cap, m, cx.n)
                .err()
                .unwrap_or_else(|| Error::invalid("--memory", "a budget", "none"))
        })?;
    let fits = |b: usize| bytes(cx, cap, m, b).map(|x| x <= m.bytes).unwrap_or(false);
    if !fits(floor) {
        return Err(Error::invalid(
            "--memory",
            format!(
                "at least {} bytes (budget {floor}, the smallest, at {} tokens × {})",
                bytes(cx, cap, m, floor)?,
                cx.n,
                m.batch
            ),
            m.bytes,
        ));
    }
    let (mut lo, mut hi) = (floor, cx.n);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let used = bytes(cx, cap, m, lo)?;
    let note = format!(
        "--memory {} for {} × {} tokens: budget {lo} per KV head, the largest whose cache fits \
         at admission ({used} bytes, {:.1}% of it, {} bytes per number, {}-token blocks)",
        m.bytes,
        m.batch,
        cx.n,
        100.0 * used as f64 / m.bytes as f64,
        m.bytes_per_element,
        cx.block_size.unwrap_or(cap.block_size),
    );
    Ok((Target::Tokens(lo), note))
}
