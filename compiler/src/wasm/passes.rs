//! The three Wasm passes of NNJIT section 4.3. Each is a free function over
//! the Wasm IR that can be switched off; [`pipeline`] runs the enabled ones in
//! their one fixed order.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use wasm_encoder::ValType;

use super::wir::{IOp, LoadOp, N, Node, WFunc};
use crate::schedule::WasmPasses;

/// Runs the enabled passes: offset, then combined instruction, then local.tee.
/// The order matters: loads must have their final form before the tee pass
/// compares them.
pub fn pipeline(f: &mut WFunc, passes: WasmPasses) {
    if passes.offset {
        offset_load_store(f);
    }
    if passes.load_splat {
        combined_instruction(f);
    }
    if passes.tee {
        load_to_local(f);
    }
}

/// Offset load/store: `load(add(x, const c))` → `load offset=c (x)`.
///
/// Sound because the lowering only leaves a non-negative constant at the top
/// of an address when `x` cannot be negative, so `x + c` does not wrap.
pub fn offset_load_store(f: &mut WFunc) {
    for n in 0..f.nodes.len() {
        while let Node::Load { addr, offset, .. } | Node::Store { addr, offset, .. } = f.nodes[n] {
            let Node::I32Bin(IOp::Add, x, k) = f.nodes[addr] else { break };
            let Node::I32Const(c) = f.nodes[k] else { break };
            let Some(new) = u32::try_from(c).ok().and_then(|c| offset.checked_add(c)) else { break };
            match &mut f.nodes[n] {
                Node::Load { addr, offset, .. } | Node::Store { addr, offset, .. } => {
                    *addr = x;
                    *offset = new;
                }
                _ => unreachable!(),
            }
        }
    }
}

/// Combined instruction: `f32x4.splat(f32.load a)` → `v128.load32_splat a`
/// (and the same for `i32x4.splat(i32.load a)`).
pub fn combined_instruction(f: &mut WFunc) {
    for n in 0..f.nodes.len() {
        let (Node::F32x4Splat(x) | Node::I32x4Splat(x)) = f.nodes[n] else { continue };
        if let Node::Load { op: LoadOp::F32 | LoadOp::I32, mem, offset, addr } = f.nodes[x] {
            f.nodes[n] = Node::Load { op: LoadOp::V128Splat32, mem, offset, addr };
        }
    }
}

/// Load/store to variable: within straight-line code, a load of an address
/// already loaded (and not stored to since) becomes `local.get` of a local
/// that the first load fills with `local.tee`.
pub fn load_to_local(f: &mut WFunc) {
    let body = std::mem::take(&mut f.body);
    tee_list(f, &body);
    f.body = body;
}

/// An earlier load whose value may be reused.
struct Seen {
    node: N,
    local: Option<u32>,
}

/// The loads seen so far in one straight-line region, indexed so that each
/// lookup and each invalidation costs time in proportion to what it touches.
#[derive(Default)]
struct Region {
    entries: Vec<Option<Seen>>,
    by_hash: HashMap<u64, Vec<usize>>,
    by_local: HashMap<u32, Vec<usize>>,
    by_mem: HashMap<u32, Vec<usize>>,
}

impl Region {
    fn clear(&mut self) {
        self.entries.clear();
        self.by_hash.clear();
        self.by_local.clear();
        self.by_mem.clear();
    }

    fn find(&self, f: &WFunc, n: N, hash: u64) -> Option<usize> {
        self.by_hash.get(&hash)?.iter().copied().find(|&i| self.entries[i].as_ref().is_some_and(|s| f.same_value(s.node, n)))
    }

    fn insert(&mut self, f: &WFunc, n: N, hash: u64, mem: u32) {
        let i = self.entries.len();
        self.entries.push(Some(Seen { node: n, local: None }));
        self.by_hash.entry(hash).or_default().push(i);
        self.by_mem.entry(mem).or_default().push(i);
        let mut locals = Vec::new();
        locals_read(f, n, &mut locals);
        locals.dedup();
        for l in locals {
            self.by_local.entry(l).or_default().push(i);
        }
    }

    fn forget(&mut self, ids: Option<Vec<usize>>) {
        for i in ids.into_iter().flatten() {
            self.entries[i] = None;
        }
    }
}

fn locals_read(f: &WFunc, n: N, out: &mut Vec<u32>) {
    if let Node::LocalGet(l) = f.nodes[n] {
        out.push(l);
    }
    for o in f.operands(n) {
        locals_read(f, o, out);
    }
}

/// A hash of the value a node computes, consistent with [`WFunc::same_value`].
fn value_hash(f: &WFunc, n: N) -> u64 {
    let mut h = DefaultHasher::new();
    match &f.nodes[n] {
        Node::I32Const(v) => (0u8, v).hash(&mut h),
        Node::F32Const(v) => (1u8, v.to_bits()).hash(&mut h),
        Node::LocalGet(l) => (2u8, l).hash(&mut h),
        Node::I32Bin(op, ..) => (3u8, op).hash(&mut h),
        Node::Load { op, mem, offset, .. } => (4u8, op, mem, offset).hash(&mut h),
        _ => (5u8, n).hash(&mut h),
    }
    for o in f.operands(n) {
        value_hash(f, o).hash(&mut h);
    }
    h.finish()
}

fn tee_list(f: &mut WFunc, list: &[N]) {
    let mut region = Region::default();
    for &s in list {
        visit(f, s, &mut region);
    }
}

fn visit(f: &mut WFunc, n: N, seen: &mut Region) {
    match f.nodes[n].clone() {
        Node::Block(list) => {
            for s in list {
                visit(f, s, seen);
            }
            return;
        }
        Node::Loop(list) => {
            // A loop body runs many times: nothing loaded before it is known
            // inside it, and nothing it loads is known after it.
            seen.clear();
            tee_list(f, &list);
            return;
        }
        Node::If(cond, list) => {
            visit(f, cond, seen);
            seen.clear();
            tee_list(f, &list);
            return;
        }
        _ => {}
    }
    for o in f.operands(n) {
        visit(f, o, seen);
    }
    match f.nodes[n] {
        Node::Load { op, mem, .. } => {
            let hash = value_hash(f, n);
            if let Some(i) = seen.find(f, n, hash) {
                let entry = seen.entries[i].as_mut().expect("found entries are live");
                let local = match entry.local {
                    Some(l) => l,
                    None => {
                        let ty = match op {
                            LoadOp::F32 => ValType::F32,
                            LoadOp::I32 => ValType::I32,
                            LoadOp::V128 | LoadOp::V128Splat32 => ValType::V128,
                        };
                        let l = f.new_local(ty);
                        // Move the first load to a new node and tee its value.
                        let first = entry.node;
                        let moved = f.push(f.nodes[first].clone());
                        f.nodes[first] = Node::LocalTee(l, moved);
                        *entry = Seen { node: moved, local: Some(l) };
                        l
                    }
                };
                f.nodes[n] = Node::LocalGet(local);
            } else {
                seen.insert(f, n, hash, mem);
            }
        }
        Node::Store { mem, .. } => {
            // Conservatively forget every load from the memory stored to.
            let ids = seen.by_mem.remove(&mem);
            seen.forget(ids);
        }
        Node::LocalSet(l, _) | Node::LocalTee(l, _) => {
            let ids = seen.by_local.remove(&l);
            seen.forget(ids);
        }
        _ => {}
    }
}
