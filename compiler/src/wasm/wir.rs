//! The Wasm IR: a tree of Wasm instructions in expression form, like
//! Binaryen's. The three passes of NNJIT section 4.3 rewrite it; [`encode`]
//! turns it into the body of a `wasm_encoder::Function`.

use wasm_encoder::{BlockType, Instruction, MemArg, MemArgTarget, ValType};

/// Index of a node in [`WFunc::nodes`].
pub type N = usize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoadOp {
    F32,
    I32,
    V128,
    /// `v128.load32_splat`: one 32-bit lane, copied to all four.
    V128Splat32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreOp {
    F32,
    I32,
    V128,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IOp {
    Add,
    Sub,
    Mul,
    DivS,
    RemS,
    ShrU,
    And,
    Or,
    LtS,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FOp {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
}

/// Unary float instructions (`f32.*` and `f32x4.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FUnOp {
    Abs,
    /// To the nearest integer, ties to even.
    Nearest,
}

/// One node of the tree. Operands are node indices.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    I32Const(i32),
    F32Const(f32),
    LocalGet(u32),
    LocalSet(u32, N),
    LocalTee(u32, N),
    I32Bin(IOp, N, N),
    /// `select(a, b, cond)`: used for `min`.
    Select(N, N, N),
    Load {
        op: LoadOp,
        mem: u32,
        offset: u32,
        addr: N,
    },
    Store {
        op: StoreOp,
        mem: u32,
        offset: u32,
        addr: N,
        value: N,
    },
    F32Bin(FOp, N, N),
    F32x4Bin(FOp, N, N),
    F32Un(FUnOp, N),
    F32x4Un(FUnOp, N),
    /// `i32.trunc_sat_f32_s`.
    I32TruncSatF32S(N),
    F32x4Splat(N),
    I32x4Splat(N),
    F32x4RelaxedMadd(N, N, N),
    I32x4ShrU(N, N),
    V128And(N, N),
    I32x4Add(N, N),
    /// `i32x4.dot_i16x8_s`: lane i = a₂ᵢ·b₂ᵢ + a₂ᵢ₊₁·b₂ᵢ₊₁ over i16 lanes.
    I32x4DotI16x8S(N, N),
    /// `i16x8.extend_{low,high}_i8x16_s` or `i32x4.extend_{low,high}_i16x8_s`.
    ExtendS(crate::ir::Extend, N),
    F32ConvertI32U(N),
    F32ReinterpretI32(N),
    F32x4ConvertI32x4U(N),
    F32x4ConvertI32x4S(N),
    F32x4ExtractLane(N, u8),
    I32x4ExtractLane(N, u8),
    /// A sequence of statements (void nodes).
    Block(Vec<N>),
    /// A `loop` whose body ends by branching back while the condition holds.
    Loop(Vec<N>),
    /// `br_if` to the enclosing loop (depth 0).
    BrIfLoop(N),
    If(N, Vec<N>),
}

/// A function in Wasm IR.
#[derive(Clone, Debug, Default)]
pub struct WFunc {
    pub params: u32,
    /// Types of the locals after the parameters.
    pub locals: Vec<ValType>,
    pub nodes: Vec<Node>,
    pub body: Vec<N>,
}

impl WFunc {
    pub fn push(&mut self, n: Node) -> N {
        self.nodes.push(n);
        self.nodes.len() - 1
    }

    pub fn new_local(&mut self, ty: ValType) -> u32 {
        self.locals.push(ty);
        self.params + self.locals.len() as u32 - 1
    }

    /// Operands of a node, in evaluation order. Statement lists are not operands.
    pub fn operands(&self, n: N) -> Vec<N> {
        match &self.nodes[n] {
            Node::I32Const(_) | Node::F32Const(_) | Node::LocalGet(_) => vec![],
            Node::LocalSet(_, a)
            | Node::LocalTee(_, a)
            | Node::F32x4Splat(a)
            | Node::I32x4Splat(a)
            | Node::F32ConvertI32U(a)
            | Node::F32ReinterpretI32(a)
            | Node::F32x4ConvertI32x4U(a)
            | Node::F32x4ConvertI32x4S(a)
            | Node::F32Un(_, a)
            | Node::F32x4Un(_, a)
            | Node::I32TruncSatF32S(a)
            | Node::ExtendS(_, a)
            | Node::F32x4ExtractLane(a, _)
            | Node::I32x4ExtractLane(a, _)
            | Node::BrIfLoop(a) => vec![*a],
            Node::Load { addr, .. } => vec![*addr],
            Node::I32Bin(_, a, b)
            | Node::F32Bin(_, a, b)
            | Node::F32x4Bin(_, a, b)
            | Node::I32x4ShrU(a, b)
            | Node::V128And(a, b)
            | Node::I32x4Add(a, b)
            | Node::I32x4DotI16x8S(a, b) => {
                vec![*a, *b]
            }
            Node::Store { addr, value, .. } => vec![*addr, *value],
            Node::Select(a, b, c) | Node::F32x4RelaxedMadd(a, b, c) => vec![*a, *b, *c],
            Node::If(c, _) => vec![*c],
            Node::Block(_) | Node::Loop(_) => vec![],
        }
    }

    /// Whether two nodes compute the same value from the same locals.
    pub fn same_value(&self, a: N, b: N) -> bool {
        if a == b {
            return true;
        }
        let (na, nb) = (&self.nodes[a], &self.nodes[b]);
        let shallow = match (na, nb) {
            (Node::I32Const(x), Node::I32Const(y)) => x == y,
            (Node::F32Const(x), Node::F32Const(y)) => x.to_bits() == y.to_bits(),
            (Node::LocalGet(x), Node::LocalGet(y)) => x == y,
            (Node::I32Bin(x, ..), Node::I32Bin(y, ..)) => x == y,
            (Node::Load { op: o1, mem: m1, offset: f1, .. }, Node::Load { op: o2, mem: m2, offset: f2, .. }) => {
                o1 == o2 && m1 == m2 && f1 == f2
            }
            _ => false,
        };
        if !shallow {
            return false;
        }
        let (oa, ob) = (self.operands(a), self.operands(b));
        oa.len() == ob.len() && oa.iter().zip(&ob).all(|(x, y)| self.same_value(*x, *y))
    }
}

fn memarg(mem: u32, offset: u32, align: u32) -> MemArg {
    MemArg { offset: offset as u64, align, target: MemArgTarget::Memory(mem), ordering: None }
}

/// Appends the instructions of `f`'s body to `out`, ending with `end`.
pub fn encode(f: &WFunc, out: &mut wasm_encoder::Function) {
    for &n in &f.body {
        encode_node(f, n, out);
    }
    out.instruction(&Instruction::End);
}

fn encode_node(f: &WFunc, n: N, out: &mut wasm_encoder::Function) {
    use Instruction as I;
    let node = &f.nodes[n];
    match node {
        Node::Block(body) => {
            for &s in body {
                encode_node(f, s, out);
            }
            return;
        }
        Node::Loop(body) => {
            out.instruction(&I::Loop(BlockType::Empty));
            for &s in body {
                encode_node(f, s, out);
            }
            out.instruction(&I::End);
            return;
        }
        Node::If(cond, body) => {
            encode_node(f, *cond, out);
            out.instruction(&I::If(BlockType::Empty));
            for &s in body {
                encode_node(f, s, out);
            }
            out.instruction(&I::End);
            return;
        }
        _ => {}
    }
    for o in f.operands(n) {
        encode_node(f, o, out);
    }
    let ins = match *node {
        Node::I32Const(v) => I::I32Const(v),
        Node::F32Const(v) => I::F32Const(v.into()),
        Node::LocalGet(l) => I::LocalGet(l),
        Node::LocalSet(l, _) => I::LocalSet(l),
        Node::LocalTee(l, _) => I::LocalTee(l),
        Node::I32Bin(op, ..) => match op {
            IOp::Add => I::I32Add,
            IOp::Sub => I::I32Sub,
            IOp::Mul => I::I32Mul,
            IOp::DivS => I::I32DivS,
            IOp::RemS => I::I32RemS,
            IOp::ShrU => I::I32ShrU,
            IOp::And => I::I32And,
            IOp::Or => I::I32Or,
            IOp::LtS => I::I32LtS,
        },
        Node::Select(..) => I::Select,
        Node::Load { op, mem, offset, .. } => match op {
            LoadOp::F32 => I::F32Load(memarg(mem, offset, 2)),
            LoadOp::I32 => I::I32Load(memarg(mem, offset, 2)),
            LoadOp::V128 => I::V128Load(memarg(mem, offset, 2)),
            LoadOp::V128Splat32 => I::V128Load32Splat(memarg(mem, offset, 2)),
        },
        Node::Store { op, mem, offset, .. } => match op {
            StoreOp::F32 => I::F32Store(memarg(mem, offset, 2)),
            StoreOp::I32 => I::I32Store(memarg(mem, offset, 2)),
            StoreOp::V128 => I::V128Store(memarg(mem, offset, 2)),
        },
        Node::F32Bin(op, ..) => match op {
            FOp::Add => I::F32Add,
            FOp::Sub => I::F32Sub,
            FOp::Mul => I::F32Mul,
            FOp::Div => I::F32Div,
            FOp::Min => I::F32Min,
            FOp::Max => I::F32Max,
        },
        Node::F32x4Bin(op, ..) => match op {
            FOp::Add => I::F32x4Add,
            FOp::Sub => I::F32x4Sub,
            FOp::Mul => I::F32x4Mul,
            FOp::Div => I::F32x4Div,
            FOp::Min => I::F32x4Min,
            FOp::Max => I::F32x4Max,
        },
        Node::F32Un(op, _) => match op {
            FUnOp::Abs => I::F32Abs,
            FUnOp::Nearest => I::F32Nearest,
        },
        Node::F32x4Un(op, _) => match op {
            FUnOp::Abs => I::F32x4Abs,
            FUnOp::Nearest => I::F32x4Nearest,
        },
        Node::I32TruncSatF32S(_) => I::I32TruncSatF32S,
        Node::F32x4Splat(_) => I::F32x4Splat,
        Node::I32x4Splat(_) => I::I32x4Splat,
        Node::F32x4RelaxedMadd(..) => I::F32x4RelaxedMadd,
        Node::I32x4ShrU(..) => I::I32x4ShrU,
        Node::V128And(..) => I::V128And,
        Node::I32x4Add(..) => I::I32x4Add,
        Node::I32x4DotI16x8S(..) => I::I32x4DotI16x8S,
        Node::ExtendS(e, _) => match e {
            crate::ir::Extend::I8Low => I::I16x8ExtendLowI8x16S,
            crate::ir::Extend::I8High => I::I16x8ExtendHighI8x16S,
            crate::ir::Extend::I16Low => I::I32x4ExtendLowI16x8S,
            crate::ir::Extend::I16High => I::I32x4ExtendHighI16x8S,
        },
        Node::F32ConvertI32U(_) => I::F32ConvertI32U,
        Node::F32ReinterpretI32(_) => I::F32ReinterpretI32,
        Node::F32x4ConvertI32x4U(_) => I::F32x4ConvertI32x4U,
        Node::F32x4ConvertI32x4S(_) => I::F32x4ConvertI32x4S,
        Node::F32x4ExtractLane(_, lane) => I::F32x4ExtractLane(lane),
        Node::I32x4ExtractLane(_, lane) => I::I32x4ExtractLane(lane),
        Node::BrIfLoop(_) => I::BrIf(0),
        Node::Block(_) | Node::Loop(_) | Node::If(..) => unreachable!("handled above"),
    };
    out.instruction(&ins);
}
