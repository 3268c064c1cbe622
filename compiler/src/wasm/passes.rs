//! The three Wasm passes of NNJIT section 4.3. Each is a free function over
//! the Wasm IR that can be switched off; [`pipeline`] runs the enabled ones in
//! their one fixed order.

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
        loop {
            let (addr, offset) = match f.nodes[n] {
                Node::Load { addr, offset, .. } | Node::Store { addr, offset, .. } => (addr, offset),
                _ => break,
            };
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

fn tee_list(f: &mut WFunc, list: &[N]) {
    let mut seen: Vec<Seen> = Vec::new();
    for &s in list {
        visit(f, s, &mut seen);
    }
}

fn visit(f: &mut WFunc, n: N, seen: &mut Vec<Seen>) {
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
        Node::Load { op, .. } => {
            if let Some(i) = seen.iter().position(|s| f.same_value(s.node, n)) {
                let local = match seen[i].local {
                    Some(l) => l,
                    None => {
                        let ty = if matches!(op, LoadOp::F32) {
                            ValType::F32
                        } else if matches!(op, LoadOp::I32) {
                            ValType::I32
                        } else {
                            ValType::V128
                        };
                        let l = f.new_local(ty);
                        // Move the first load to a new node and tee its value.
                        let first = seen[i].node;
                        let moved = f.push(f.nodes[first].clone());
                        f.nodes[first] = Node::LocalTee(l, moved);
                        seen[i] = Seen { node: moved, local: Some(l) };
                        l
                    }
                };
                f.nodes[n] = Node::LocalGet(local);
            } else {
                seen.push(Seen { node: n, local: None });
            }
        }
        Node::Store { mem, .. } => {
            // Conservatively forget every load from the memory stored to.
            seen.retain(|s| !matches!(f.nodes[s.node], Node::Load { mem: m, .. } if m == mem));
        }
        Node::LocalSet(l, _) | Node::LocalTee(l, _) => {
            seen.retain(|s| !f.reads_local(s.node, l));
        }
        _ => {}
    }
}
