//! Loop IR (GPU flavor) → naga IR, directly: no WGSL text is written or
//! parsed on the way. The module follows the same lowering rules as the
//! module docs of [`super`] state for the text (unrolled loops replicated with
//! their counter as a literal, `vec4` buffers where every 4-lane access is
//! aligned, Wasm integer semantics); naga's validator checks it and naga's
//! WGSL backend writes its text.
//!
//! Long on purpose: one lowering, a case per IR statement and expression kind, that reads best whole.
//!
//! Why not emit text and parse it: naga's WGSL front end costs about 0.3 µs
//! per byte of our unrolled kernels (3–6 ms each, and part of it grows with
//! the square of a function's expression count), which is most of a
//! candidate's compile time. Building the module costs a small fraction of
//! that, and the validator runs on the same module either way.

use std::collections::HashMap;
use std::num::NonZeroU32;

use naga::{
    AddressSpace, ArraySize, BinaryOperator as NOp, Binding, Block, BuiltIn, Expression as N, Literal, MathFunction, ScalarKind, Span,
    Statement, Type, TypeInner, VectorSize,
};

use super::rows::{self, Affine, Facts};
use super::{EmitError, vec4_buffers};
use crate::ir::verify::{Flavor, Types, verify};
use crate::ir::{BinOp, Builtin, ERF_CLAMP, ERF_P, ERF_Q, Elem, Expr, Func, Handle, LoadTy, Space, Stmt, Ty, UnOp};

type NExpr = naga::Handle<N>;

/// Builds the naga module of a verified GPU-flavor function: entry point
/// `main`, buffers bound as the kernel ABI says, `lid`/`wid` builtins.
pub fn module(f: &Func, workgroup_size: [u32; 3]) -> Result<naga::Module, EmitError> {
    module_with(f, workgroup_size, false)
}

/// [`module`], with `half`: every IR `f32` value, literal and `f32`
/// workgroup or private buffer becomes f16 (f16 arithmetic, the schedule's
/// `f16_acc`), and f16 buffers are read and written without conversion.
/// The IR stays as it is; only its float type changes.
pub fn module_with(f: &Func, workgroup_size: [u32; 3], half: bool) -> Result<naga::Module, EmitError> {
    module_passes(&[(f, "main", workgroup_size)], half)
}

/// One module with an entry point per `(function, name, workgroup size)`,
/// in order (a kernel's passes). Buffers bound by the ABI (arguments and
/// the `global` scratch) are one global each, shared by every entry that
/// uses them: an array of `vec4` only where every entry's accesses allow
/// it, and read-write if any entry writes it. Two entries may not disagree
/// on a bound buffer's element type.
pub fn module_passes(passes: &[(&Func, &str, [u32; 3])], half: bool) -> Result<naga::Module, EmitError> {
    let mut checked = Vec::with_capacity(passes.len());
    let mut bound: HashMap<(u32, u32), Bound> = HashMap::new();
    for &(f, _, _) in passes {
        let types = verify(f, Flavor::Gpu)?;
        // Under f16 arithmetic an `f32` buffer is an f16 array: an argument
        // declared f32 would then be read at the wrong width.
        if let Some((_, b)) = f.buffers.iter().find(|(_, b)| half && b.elem == Elem::F32 && matches!(b.space, Space::Param(_))) {
            return Err(EmitError::HalfArgument(b.name.clone()));
        }
        let vec4 = vec4_buffers(f, &types);
        for (h, b) in f.buffers.iter() {
            let Some(key) = binding_of(b.space) else { continue };
            let e = bound.entry(key).or_insert(Bound { elem: b.elem, vec4: true, writable: false, global: None });
            if e.elem != b.elem {
                return Err(EmitError::BindingMismatch(b.name.clone()));
            }
            e.vec4 &= vec4[h.index()];
            e.writable |= b.writable;
        }
        checked.push((types, vec4));
    }
    let mut m = naga::Module::default();
    let mut tys = TypeSet::default();
    for (&(f, name, workgroup_size), (types, mut vec4)) in passes.iter().zip(checked) {
        for (h, b) in f.buffers.iter() {
            if let Some(key) = binding_of(b.space) {
                vec4[h.index()] = bound[&key].vec4;
            }
        }
        let function = lower_function(&mut m, &mut tys, &mut bound, (f, workgroup_size), types, vec4, name, half)?;
        m.entry_points.push(naga::EntryPoint {
            name: name.into(),
            stage: naga::ShaderStage::Compute,
            early_depth_test: None,
            workgroup_size,
            workgroup_size_overrides: None,
            function,
            mesh_info: None,
            task_payload: None,
            incoming_ray_payload: None,
        });
    }
    Ok(m)
}

/// A buffer the ABI binds, as the module declares it.
struct Bound {
    elem: Elem,
    vec4: bool,
    writable: bool,
    global: Option<naga::Handle<naga::GlobalVariable>>,
}

/// `(group, binding)` of a buffer the host binds: argument `n` at
/// `(0, n)`, the scratch buffer at `(1, 0)`.
fn binding_of(space: Space) -> Option<(u32, u32)> {
    match space {
        Space::Param(n) => Some((0, n)),
        Space::Global => Some((1, 0)),
        Space::Workgroup | Space::Scratch => None,
    }
}

/// Lowers one verified function to an entry point's function, declaring
/// its workgroup and private buffers, and the bound ones not yet declared.
#[allow(clippy::too_many_arguments)]
fn lower_function(
    m: &mut naga::Module,
    tys: &mut TypeSet,
    bound: &mut HashMap<(u32, u32), Bound>,
    (f, workgroup_size): (&Func, [u32; 3]),
    types: Types,
    vec4: Vec<bool>,
    name: &str,
    half: bool,
) -> Result<naga::Function, EmitError> {
    let mut func = naga::Function { name: Some(name.into()), ..Default::default() };

    let uvec3 = tys.get(m, TypeInner::Vector { size: VectorSize::Tri, scalar: naga::Scalar::U32 });
    for (name, b) in [("lid", BuiltIn::LocalInvocationId), ("wid", BuiltIn::WorkGroupId)] {
        func.arguments.push(naga::FunctionArgument { name: Some(name.into()), ty: uvec3, binding: Some(Binding::BuiltIn(b)) });
    }
    // The pre-emitted expressions every statement may use, made once up front.
    let args = [0, 1].map(|i| func.expressions.append(N::FunctionArgument(i), Span::UNDEFINED));
    let mut globals = Vec::with_capacity(f.buffers.len());
    // Rows of each workgroup buffer that has them, in elements (0: flat); a
    // vec4 buffer needs whole vec4s per row.
    let rows: Vec<u32> = f.buffers.iter().map(|(h, b)| if vec4[h.index()] && b.row % 4 != 0 { 0 } else { b.row }).collect();
    for (h, b) in f.buffers.iter() {
        let key = binding_of(b.space);
        if let Some(g) = key.and_then(|k| bound[&k].global) {
            globals.push(func.expressions.append(N::GlobalVariable(g), Span::UNDEFINED));
            continue;
        }
        let elem = elem_inner(b.elem, vec4[h.index()], half);
        let base = tys.get(m, elem);
        let size = if b.elem == Elem::F16 || (half && b.elem == Elem::F32) { 2 } else { 4 };
        let stride = if vec4[h.index()] { 4 * size } else { size };
        let len = if vec4[h.index()] { b.len / 4 } else { b.len };
        let (size, space, binding) = match key {
            Some((group, binding)) => {
                let access = if bound[&(group, binding)].writable {
                    naga::StorageAccess::LOAD | naga::StorageAccess::STORE
                } else {
                    naga::StorageAccess::LOAD
                };
                (ArraySize::Dynamic, AddressSpace::Storage { access }, Some(naga::ResourceBinding { group, binding }))
            }
            None if b.space == Space::Workgroup => (fixed(len), AddressSpace::WorkGroup, None),
            None => (fixed(len), AddressSpace::Private, None),
        };
        let ty = match rows[h.index()] {
            0 => tys.get(m, TypeInner::Array { base, size, stride }),
            row => {
                // array<array<T, row>, len / row>, in T's units.
                let per_row = if vec4[h.index()] { row / 4 } else { row };
                let inner = tys.get(m, TypeInner::Array { base, size: fixed(per_row), stride });
                tys.get(m, TypeInner::Array { base: inner, size: fixed(len / per_row), stride: stride * per_row })
            }
        };
        let g = m.global_variables.append(
            naga::GlobalVariable {
                name: Some(super::buf_name(f, h)),
                space,
                binding,
                ty,
                init: None,
                memory_decorations: naga::MemoryDecorations::empty(),
            },
            Span::UNDEFINED,
        );
        if let Some(k) = key {
            bound.get_mut(&k).expect("every bound buffer was noted").global = Some(g);
        }
        globals.push(func.expressions.append(N::GlobalVariable(g), Span::UNDEFINED));
    }
    // A variable whose values are all bound to expressions needs no local.
    let direct = direct_vars(f);
    let mut locals = Vec::with_capacity(f.vars.len());
    for (h, v) in f.vars.iter() {
        if direct[h.index()] {
            locals.push(None);
            continue;
        }
        let ty = tys.get(m, value_inner(v.ty, half));
        let l = func.local_variables.append(naga::LocalVariable { name: Some(super::var_name(f, h)), ty, init: None }, Span::UNDEFINED);
        locals.push(Some(func.expressions.append(N::LocalVariable(l), Span::UNDEFINED)));
    }

    let mut b = Builder {
        f,
        types,
        vec4,
        rows,
        facts: Facts::new(f, workgroup_size),
        sums: HashMap::new(),
        consts: vec![None; f.vars.len()],
        exprs: std::mem::take(&mut func.expressions),
        emitted: 0,
        blocks: vec![Block::new()],
        literals: HashMap::new(),
        loaded: vec![None; f.vars.len()],
        memo: (0..f.exprs.len()).map(|_| None).collect(),
        epoch: vec![0; f.vars.len()],
        scope: 0,
        reads: Vec::new(),
        buffer_loads: 0,
        args,
        vec4_types: [value_inner(Ty::F32x4, half), value_inner(Ty::U32x4, half)].map(|t| tys.get(m, t)),
        scalar_f32: tys.get(m, value_inner(Ty::F32, half)),
        half,
        globals,
        locals,
        bound: vec![None; f.vars.len()],
    };
    b.emitted = b.exprs.len();
    b.block(&f.body)?;
    b.flush();
    func.body = b.blocks.pop().unwrap_or_default();
    func.expressions = b.exprs;
    Ok(func)
}

/// The variables that need no local: each value the kernel gives one is
/// bound to the expression that computes it, and its reads use that
/// expression (naga writes it inline where it is read once, else as a
/// `let`; unnamed, which keeps the text short: naming each value cost a
/// fifth of a q4 decode kernel's compile time). That holds for a variable
/// whose every read follows (in program order) a set in the same naga
/// block or one around it (a block: the function's body, an `if`'s, or a
/// loop's that is not unrolled; unrolled loops are laid out in their
/// block), since an expression is in scope from its evaluation to the end
/// of its block, and no value can then reach a read from a branch; and
/// which no loop both reads before setting it and sets (that value would
/// come from the previous iteration). The counters of unrolled loops are
/// literals and need none either. Every other variable (a loop's counter,
/// an accumulator, one set in a branch and read after it) stays a `var`.
/// Without this, naga writes one `let _eN = v;` per read between two
/// stores: over 40% of the lines of an unrolled kernel.
fn direct_vars(f: &Func) -> Vec<bool> {
    let n = f.vars.len();
    let words = n.div_ceil(64);
    // The variables each expression reads, as a bitset; operands come first.
    let mut reads: Vec<u64> = vec![0; f.exprs.len() * words];
    for (h, e) in f.exprs.iter() {
        let at = h.index() * words;
        if let Expr::Var(v) = e {
            reads[at + v.index() / 64] |= 1 << (v.index() % 64);
        }
        for o in e.operands().into_iter().flatten() {
            for w in 0..words {
                reads[at + w] |= reads[o.index() * words + w];
            }
        }
    }
    struct Walk<'a> {
        reads: &'a [u64],
        words: usize,
        /// Each variable's latest set, in program order: its block and its
        /// number among all the sets so far (from 1).
        latest: Vec<Option<(u32, u32)>>,
        sets: u32,
        ok: Vec<bool>,
        /// Whether the walk is inside the unrolled loop a variable counts
        /// (its reads there are literals).
        unrolled: Vec<bool>,
        /// The blocks the walk is in, innermost last.
        open: Vec<u32>,
        blocks: u32,
        /// Per loop the walk is in: the number of sets before it, and the
        /// variables read in it before any set in it. A variable set since
        /// (its latest set numbered above) and so read is carried across
        /// iterations.
        loops: Vec<(u32, Vec<bool>)>,
    }
    impl Walk<'_> {
        fn read(&mut self, e: Handle<Expr>) {
            let at = e.index() * self.words;
            for w in 0..self.words {
                let mut bits = self.reads[at + w];
                while bits != 0 {
                    let v = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if self.unrolled[v] {
                        continue;
                    }
                    let latest = self.latest[v];
                    if !latest.is_some_and(|(b, _)| self.open.contains(&b)) {
                        self.ok[v] = false;
                    }
                    let seq = latest.map_or(0, |(_, seq)| seq);
                    for (before, first) in &mut self.loops {
                        first[v] |= seq <= *before;
                    }
                }
            }
        }
        fn nested(&mut self, body: &[Stmt], hi: Option<Handle<Expr>>) {
            self.blocks += 1;
            self.open.push(self.blocks);
            if let Some(hi) = hi {
                self.read(hi);
            }
            self.body(body);
            self.open.pop();
        }
        fn body(&mut self, body: &[Stmt]) {
            for s in body {
                match s {
                    Stmt::Set { var, value } => {
                        self.read(*value);
                        self.sets += 1;
                        self.latest[var.index()] = self.open.last().map(|&b| (b, self.sets));
                    }
                    Stmt::Store { index, value, .. } => {
                        self.read(*index);
                        self.read(*value);
                    }
                    Stmt::If { cond, body } => {
                        self.read(*cond);
                        self.nested(body, None);
                    }
                    Stmt::For(l) if l.unroll => {
                        let was = std::mem::replace(&mut self.unrolled[l.var.index()], true);
                        self.body(&l.body);
                        self.unrolled[l.var.index()] = was;
                    }
                    Stmt::For(l) => {
                        self.ok[l.var.index()] = false;
                        self.read(l.lo);
                        self.loops.push((self.sets, vec![false; self.ok.len()]));
                        self.nested(&l.body, Some(l.hi));
                        let (before, first) = self.loops.pop().unwrap_or_default();
                        for (v, read_first) in first.into_iter().enumerate() {
                            if read_first && self.latest[v].is_some_and(|(_, seq)| seq > before) {
                                self.ok[v] = false;
                            }
                        }
                    }
                    Stmt::Barrier => {}
                }
            }
        }
    }
    let mut w = Walk {
        reads: &reads,
        words,
        latest: vec![None; n],
        sets: 0,
        ok: vec![true; n],
        unrolled: vec![false; n],
        open: vec![0],
        blocks: 0,
        loops: Vec::new(),
    };
    w.body(&f.body);
    w.ok
}

fn fixed(len: u32) -> ArraySize {
    ArraySize::Constant(NonZeroU32::new(len.max(1)).unwrap_or(NonZeroU32::MIN))
}

/// naga's f16 scalar.
pub(super) const F16: naga::Scalar = naga::Scalar { kind: ScalarKind::Float, width: 2 };

fn elem_inner(e: Elem, vec4: bool, half: bool) -> TypeInner {
    let scalar = match e {
        Elem::F32 if half => F16,
        Elem::F32 => naga::Scalar::F32,
        Elem::U32 => naga::Scalar::U32,
        Elem::F16 => F16,
    };
    if vec4 { TypeInner::Vector { size: VectorSize::Quad, scalar } } else { TypeInner::Scalar(scalar) }
}

fn value_inner(t: Ty, half: bool) -> TypeInner {
    let float = if half { F16 } else { naga::Scalar::F32 };
    match t {
        Ty::I32 => TypeInner::Scalar(naga::Scalar::I32),
        Ty::F32 => TypeInner::Scalar(float),
        Ty::F32x4 => TypeInner::Vector { size: VectorSize::Quad, scalar: float },
        Ty::U32x4 => TypeInner::Vector { size: VectorSize::Quad, scalar: naga::Scalar::U32 },
    }
}

/// The module's types, each inserted once.
#[derive(Default)]
struct TypeSet {
    seen: Vec<(TypeInner, naga::Handle<Type>)>,
}

impl TypeSet {
    fn get(&mut self, m: &mut naga::Module, inner: TypeInner) -> naga::Handle<Type> {
        if let Some((_, h)) = self.seen.iter().find(|(t, _)| *t == inner) {
            return *h;
        }
        let h = m.types.insert(Type { name: None, inner: inner.clone() }, Span::UNDEFINED);
        self.seen.push((inner, h));
        h
    }
}

struct Memo {
    expr: NExpr,
    reads: Vec<(usize, u64)>,
    scope: u64,
}

struct Builder<'a> {
    f: &'a Func,
    types: Types,
    vec4: Vec<bool>,
    /// Elements per row of each two-dimensional workgroup buffer, else 0
    /// (see [`rows`]).
    rows: Vec<u32>,
    facts: Facts,
    /// Lowered row and column indices ([`Self::affine`]), reused like `memo`.
    sums: HashMap<Affine, Memo>,
    /// Loop counters of unrolled loops, replaced by their current value.
    consts: Vec<Option<i32>>,
    exprs: naga::Arena<N>,
    /// Expressions before this index are covered by an `Emit` (or need none).
    emitted: usize,
    /// The block being filled, innermost last.
    blocks: Vec<Block>,
    literals: HashMap<(u8, u32), NExpr>,
    /// The last load of each variable, with the `epoch` and `scope` it was
    /// made at: it is reused while both are unchanged, so a variable read
    /// many times between stores is loaded once, which keeps naga's output
    /// from spelling one `let` per read.
    loaded: Vec<Option<(NExpr, u64, u64)>>,
    /// Lowered IR expressions without buffer loads, by IR handle, reused
    /// while every variable they read is unchanged (`epoch`) and the block
    /// is the same (`scope`): the generators share index subexpressions,
    /// and lowering each use afresh made naga's output several times larger.
    memo: Vec<Option<Memo>>,
    /// Bumped on each store to a variable (and each new value of an unrolled
    /// loop's counter).
    epoch: Vec<u64>,
    /// Bumped at every block boundary.
    scope: u64,
    /// The (variable, epoch) reads of the expressions being lowered.
    reads: Vec<(usize, u64)>,
    /// Buffer loads lowered so far.
    buffer_loads: u64,
    args: [NExpr; 2],
    /// `vec4<f32>` and `vec4<u32>`.
    vec4_types: [naga::Handle<Type>; 2],
    /// The float scalar (`f32`, or `f16` under `half`): a subgroup shuffle's result.
    scalar_f32: naga::Handle<Type>,
    /// f16 arithmetic: see [`module_with`].
    half: bool,
    globals: Vec<NExpr>,
    /// Each variable's local, or `None` where its values are bound to
    /// expressions ([`direct_vars`]).
    locals: Vec<Option<NExpr>>,
    /// The expression a variable without a local holds now.
    bound: Vec<Option<NExpr>>,
}

impl Builder<'_> {
    /// Covers the expressions made since the last flush with one `Emit`.
    fn flush(&mut self) {
        if self.exprs.len() > self.emitted {
            let range = self.exprs.range_from(self.emitted);
            self.emitted = self.exprs.len();
            self.push(Statement::Emit(range));
        }
    }

    /// Starts a nested block (an `if` arm, a loop body or its continuing).
    fn open(&mut self) {
        self.flush();
        self.scope += 1;
        self.blocks.push(Block::new());
    }

    /// Ends the block [`Self::open`] started and returns it.
    /// Loads and expressions made inside it go out of scope, and any made
    /// before it may be stale (its stores), so neither is reused after it.
    fn close(&mut self) -> Block {
        self.flush();
        self.scope += 1;
        self.blocks.pop().unwrap_or_default()
    }

    /// The value of variable `v` (see `loaded`), or the expression it is
    /// bound to.
    fn read_var(&mut self, v: usize) -> Result<NExpr, EmitError> {
        let Some(local) = self.locals[v] else {
            // `direct_vars` saw a set of it earlier, in this block or one around it.
            return self.bound[v].ok_or(EmitError::Unbound(v));
        };
        if let Some((h, epoch, scope)) = self.loaded[v]
            && (epoch, scope) == (self.epoch[v], self.scope)
        {
            return Ok(h);
        }
        let h = self.load(local);
        self.loaded[v] = Some((h, self.epoch[v], self.scope));
        Ok(h)
    }

    /// Stores `value` to variable `v`, or binds `v` to it.
    fn write_var(&mut self, v: usize, value: NExpr) {
        match self.locals[v] {
            Some(pointer) => self.stmt_after_flush(Statement::Store { pointer, value }),
            None => self.bound[v] = Some(value),
        }
        self.epoch[v] += 1;
    }

    fn push(&mut self, s: Statement) {
        if let Some(b) = self.blocks.last_mut() {
            b.push(s, Span::UNDEFINED);
        }
    }

    /// Ends the pending `Emit`, then appends `s`.
    fn stmt_after_flush(&mut self, s: Statement) {
        self.flush();
        self.push(s);
    }

    fn add(&mut self, e: N) -> NExpr {
        self.exprs.append(e, Span::UNDEFINED)
    }

    /// A literal is in scope everywhere and must not sit inside an `Emit`,
    /// so making one first closes the expressions pending before it.
    fn lit(&mut self, l: Literal) -> NExpr {
        let key = match l {
            Literal::I32(v) => (0, v as u32),
            Literal::U32(v) => (1, v),
            Literal::F32(v) => (2, v.to_bits()),
            Literal::F16(v) => (3, v.to_bits() as u32),
            _ => unreachable!("only i32, u32, f32 and f16 literals are made"),
        };
        if let Some(&h) = self.literals.get(&key) {
            return h;
        }
        self.flush();
        let h = self.add(N::Literal(l));
        self.emitted = self.exprs.len();
        self.literals.insert(key, h);
        h
    }

    fn i32(&mut self, v: i32) -> NExpr {
        self.lit(Literal::I32(v))
    }

    fn bin(&mut self, op: NOp, left: NExpr, right: NExpr) -> NExpr {
        self.add(N::Binary { op, left, right })
    }

    fn bitcast(&mut self, expr: NExpr, kind: ScalarKind) -> NExpr {
        self.add(N::As { expr, kind, convert: None })
    }

    fn math(&mut self, fun: MathFunction, arg: NExpr, arg1: NExpr, arg2: Option<NExpr>) -> NExpr {
        self.add(N::Math { fun, arg, arg1: Some(arg1), arg2, arg3: None })
    }

    fn splat(&mut self, value: NExpr) -> NExpr {
        self.add(N::Splat { size: VectorSize::Quad, value })
    }

    fn load(&mut self, pointer: NExpr) -> NExpr {
        self.add(N::Load { pointer })
    }

    fn access(&mut self, base: NExpr, index: NExpr) -> NExpr {
        self.add(N::Access { base, index })
    }

    /// Pointer to scalar element `i` of buffer `buf`, whichever way it is declared.
    fn element(&mut self, buf: Handle<crate::ir::Buffer>, i: NExpr) -> NExpr {
        if self.vec4[buf.index()] {
            // Lane `i & 3` of the vec4 `i >> 2` ([`Self::quad`]): the same
            // element 4q + r for every i, without a division's fix-ups.
            let v = self.quad(buf, i);
            let three = self.i32(3);
            let r = self.bin(NOp::And, i, three);
            self.access(v, r)
        } else {
            let g = self.globals[buf.index()];
            self.access(g, i)
        }
    }

    /// Pointer to the `vec4` holding element `i` of a `vec4` buffer: `i >> 2`,
    /// not `i / 4` (one instruction instead of a signed division's fix-ups;
    /// for an aligned i exactly i / 4).
    fn quad(&mut self, buf: Handle<crate::ir::Buffer>, i: NExpr) -> NExpr {
        let g = self.globals[buf.index()];
        let two = self.lit(Literal::U32(2));
        let q = self.bin(NOp::ShiftRight, i, two);
        self.access(g, q)
    }

    /// `index` lowered, for a buffer indexed by its flat index (one without
    /// rows); `None` for a buffer with rows, which [`Self::row_pointer`]
    /// indexes from the IR.
    fn flat_index(&mut self, buf: Handle<crate::ir::Buffer>, index: Handle<Expr>) -> Result<Option<NExpr>, EmitError> {
        if self.rows[buf.index()] > 0 { Ok(None) } else { self.expr(index).map(Some) }
    }

    /// Pointer for an access `lanes` wide (4 only on a `vec4` buffer) to
    /// `buf` at IR index `index`, whose lowered flat index is `flat` (see
    /// [`Self::flat_index`]); with `lane: Some(k)`, element `index + k` alone.
    fn pointer(
        &mut self,
        buf: Handle<crate::ir::Buffer>,
        (index, flat): (Handle<Expr>, Option<NExpr>),
        lane: Option<i64>,
        lanes: u32,
    ) -> Result<NExpr, EmitError> {
        let Some(i) = flat else { return self.row_pointer(buf, index, lane.unwrap_or(0), lanes) };
        let i = match lane {
            Some(k) => {
                let off = self.i32(k as i32);
                self.bin(NOp::Add, i, off)
            }
            None => i,
        };
        Ok(if lanes == 4 { self.quad(buf, i) } else { self.element(buf, i) })
    }

    /// Pointer to element `index + extra` of two-dimensional workgroup
    /// buffer `buf`, read `lanes` wide (a `vec4` with 4 on a `vec4` buffer):
    /// `[row][column]` as [`rows::split`] finds them, else `[q / row][q % row]`
    /// of the flat index `q`.
    fn row_pointer(&mut self, buf: Handle<crate::ir::Buffer>, index: Handle<Expr>, extra: i64, lanes: u32) -> Result<NExpr, EmitError> {
        let f = self.f;
        let (row, vec, g) = (self.rows[buf.index()], self.vec4[buf.index()], self.globals[buf.index()]);
        let len = f.buffers[buf].len;
        // A variable read as its value only once its assignment has run.
        let epoch = &self.epoch;
        let facts = &self.facts;
        let subst = |v: Handle<crate::ir::Var>| if epoch[v.index()] > 0 { facts.sum_of(v) } else { None };
        if let Some((outer, inner)) = rows::split(f, facts, (&self.consts, &subst), index, extra, row, len, lanes) {
            let r = self.index_by(g, &outer)?;
            if !vec {
                return self.index_by(r, &inner);
            }
            if inner.terms.iter().all(|&(_, k)| k % 4 == 0) {
                // Whole vec4s apart: the lane is the constant's remainder.
                let quad = Affine { c: inner.c / 4, terms: inner.terms.iter().map(|&(t, k)| (t, k / 4)).collect() };
                let q = self.index_by(r, &quad)?;
                return Ok(if lanes == 4 { q } else { self.add(N::AccessIndex { base: q, index: (inner.c % 4) as u32 }) });
            }
            // A column whose alignment the terms do not show (the buffer is
            // vec4, so a 4-lane access is aligned); proven non-negative.
            let c = self.affine(&inner)?;
            let q = self.quad_of(c);
            let p = self.access(r, q);
            if lanes == 4 {
                return Ok(p);
            }
            let three = self.i32(3);
            let lane = self.bin(NOp::And, c, three);
            return Ok(self.access(p, lane));
        }
        let mut i = self.expr(index)?;
        if extra != 0 {
            let e = self.i32(extra as i32);
            i = self.bin(NOp::Add, i, e);
        }
        let iu = self.bitcast(i, ScalarKind::Uint);
        let (q, per_row) = if vec {
            let two = self.lit(Literal::U32(2));
            (self.bin(NOp::ShiftRight, iu, two), row / 4)
        } else {
            (iu, row)
        };
        let n = self.lit(Literal::U32(per_row));
        let (o, c) = (self.bin(NOp::Divide, q, n), self.bin(NOp::Modulo, q, n));
        let r = self.access(g, o);
        let p = self.access(r, c);
        if vec && lanes == 1 {
            let three = self.lit(Literal::U32(3));
            let lane = self.bin(NOp::And, iu, three);
            return Ok(self.access(p, lane));
        }
        Ok(p)
    }

    /// `i >> 2` of a non-negative i32.
    fn quad_of(&mut self, i: NExpr) -> NExpr {
        let two = self.lit(Literal::U32(2));
        let iu = self.bitcast(i, ScalarKind::Uint);
        self.bin(NOp::ShiftRight, iu, two)
    }

    /// `base[a]`: a literal index where `a` is a constant (no bounds check).
    fn index_by(&mut self, base: NExpr, a: &Affine) -> Result<NExpr, EmitError> {
        if a.terms.is_empty() {
            return Ok(self.add(N::AccessIndex { base, index: a.c as u32 }));
        }
        let i = self.affine(a)?;
        Ok(self.access(base, i))
    }

    /// The i32 value of `a`, made once while the variables it reads keep
    /// their values (as `memo` does for IR expressions).
    fn affine(&mut self, a: &Affine) -> Result<NExpr, EmitError> {
        if let Some(m) = self.sums.get(a)
            && m.scope == self.scope
            && m.reads.iter().all(|&(v, ep)| self.epoch[v] == ep)
        {
            let (h, reads) = (m.expr, m.reads.clone());
            self.reads.extend(reads);
            return Ok(h);
        }
        let (mark, loads) = (self.reads.len(), self.buffer_loads);
        let mut sum: Option<NExpr> = None;
        for &(t, k) in &a.terms {
            let x = self.expr(t)?;
            let term = if k == 1 {
                x
            } else {
                let kc = self.i32(k as i32);
                self.bin(NOp::Multiply, x, kc)
            };
            sum = Some(match sum {
                Some(s) => self.bin(NOp::Add, s, term),
                None => term,
            });
        }
        let h = match sum {
            Some(s) if a.c != 0 => {
                let c = self.i32(a.c as i32);
                self.bin(NOp::Add, s, c)
            }
            Some(s) => s,
            None => self.i32(a.c as i32),
        };
        if self.buffer_loads == loads {
            let reads = self.reads[mark..].to_vec();
            self.sums.insert(a.clone(), Memo { expr: h, reads, scope: self.scope });
        }
        Ok(h)
    }

    fn block(&mut self, body: &[Stmt]) -> Result<(), EmitError> {
        for s in body {
            self.stmt(s)?;
        }
        Ok(())
    }

    /// Lowers `body` into a fresh block and returns it.
    fn nested(&mut self, body: &[Stmt]) -> Result<Block, EmitError> {
        self.open();
        self.block(body)?;
        Ok(self.close())
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), EmitError> {
        let f = self.f;
        match s {
            Stmt::For(l) if l.unroll => {
                // Verified: constant bounds.
                let lo = crate::ir::const_i32(f, l.lo).unwrap_or(0);
                let hi = crate::ir::const_i32(f, l.hi).unwrap_or(0);
                let mut i = lo as i64;
                while i < hi as i64 {
                    self.consts[l.var.index()] = Some(i as i32);
                    self.epoch[l.var.index()] += 1;
                    self.block(&l.body)?;
                    i += l.step as i64;
                }
                self.consts[l.var.index()] = None;
            }
            Stmt::For(l) => {
                // for (v = lo; v < hi; v += step) as naga spells it: a loop
                // whose body starts with `if (v < hi) {} else { break; }`.
                let var = l.var.index();
                let lo = self.expr(l.lo)?;
                self.write_var(var, lo);
                self.open();
                let v = self.read_var(var)?;
                let hi = self.expr(l.hi)?;
                let cond = self.bin(NOp::Less, v, hi);
                let mut brk = Block::new();
                brk.push(Statement::Break, Span::UNDEFINED);
                self.stmt_after_flush(Statement::If { condition: cond, accept: Block::new(), reject: brk });
                self.block(&l.body)?;
                let body = self.close();
                self.open();
                let v = self.read_var(var)?;
                let step = self.i32(l.step as i32);
                let next = self.bin(NOp::Add, v, step);
                self.write_var(var, next);
                let continuing = self.close();
                self.push(Statement::Loop { body, continuing, break_if: None });
            }
            Stmt::Set { var, value } => {
                let v = self.expr(*value)?;
                self.write_var(var.index(), v);
            }
            Stmt::Store { buf, index, value } => {
                let mut v = self.expr(*value)?;
                let ty = self.types.of(*value);
                if ty == Ty::I32 && f.buffers[*buf].elem == Elem::U32 {
                    v = self.bitcast(v, ScalarKind::Uint);
                }
                if f.buffers[*buf].elem == Elem::F16 && !self.half {
                    v = self.add(N::As { expr: v, kind: ScalarKind::Float, convert: Some(2) });
                }
                let flat = self.flat_index(*buf, *index)?;
                if ty.lanes() == 1 || self.vec4[buf.index()] {
                    let p = self.pointer(*buf, (*index, flat), None, ty.lanes())?;
                    self.stmt_after_flush(Statement::Store { pointer: p, value: v });
                } else {
                    for k in 0..4u32 {
                        let lane = self.add(N::AccessIndex { base: v, index: k });
                        let p = self.pointer(*buf, (*index, flat), Some(k as i64), 1)?;
                        self.stmt_after_flush(Statement::Store { pointer: p, value: lane });
                    }
                }
            }
            Stmt::If { cond, body } => {
                let c = self.expr(*cond)?;
                let zero = self.i32(0);
                let condition = self.bin(NOp::NotEqual, c, zero);
                let accept = self.nested(body)?;
                self.push(Statement::If { condition, accept, reject: Block::new() });
            }
            Stmt::Barrier => self.stmt_after_flush(Statement::ControlBarrier(naga::Barrier::WORK_GROUP)),
        }
        Ok(())
    }

    /// `x op y` when both are `i32` literals (unrolled loops make many such
    /// products), by the IR's own rule ([`BinOp::eval_i32`]).
    fn fold(&self, op: BinOp, x: NExpr, y: NExpr) -> Option<i32> {
        let (N::Literal(Literal::I32(a)), N::Literal(Literal::I32(b))) = (&self.exprs[x], &self.exprs[y]) else { return None };
        op.eval_i32(*a, *b)
    }

    /// A float literal of the kernel's float type (f16 under `half`).
    fn flit(&mut self, v: f32) -> NExpr {
        self.lit(if self.half { Literal::F16(half::f16::from_f32(v)) } else { Literal::F32(v) })
    }

    /// A float literal, splat to a `vec4` when `vector`.
    fn fconst(&mut self, v: f32, vector: bool) -> NExpr {
        let c = self.flit(v);
        if vector { self.splat(c) } else { c }
    }

    /// The width of a conversion to the kernel's float type.
    fn float_width(&self) -> u8 {
        if self.half { 2 } else { 4 }
    }

    /// [`crate::ir::erf_f32`], step for step (WGSL has no erf): naga
    /// expressions are values, so the clamped argument and its square are
    /// simply reused.
    fn erf(&mut self, x: NExpr, vector: bool) -> NExpr {
        let lo = self.fconst(-ERF_CLAMP, vector);
        let hi = self.fconst(ERF_CLAMP, vector);
        let x = self.math(MathFunction::Clamp, x, lo, Some(hi));
        let x2 = self.bin(NOp::Multiply, x, x);
        let mut p = self.fconst(ERF_P[0], vector);
        for &c in &ERF_P[1..] {
            let m = self.bin(NOp::Multiply, p, x2);
            let c = self.fconst(c, vector);
            p = self.bin(NOp::Add, m, c);
        }
        let p = self.bin(NOp::Multiply, p, x);
        let mut q = self.fconst(ERF_Q[0], vector);
        for &c in &ERF_Q[1..] {
            let m = self.bin(NOp::Multiply, q, x2);
            let c = self.fconst(c, vector);
            q = self.bin(NOp::Add, m, c);
        }
        self.bin(NOp::Divide, p, q)
    }

    /// Lowers IR expression `e` at the current point (see `memo`).
    fn expr(&mut self, e: Handle<Expr>) -> Result<NExpr, EmitError> {
        let Builder { memo, reads, epoch, scope, .. } = self;
        if let Some(m) = &memo[e.index()]
            && m.scope == *scope
            && m.reads.iter().all(|&(v, ep)| epoch[v] == ep)
        {
            reads.extend_from_slice(&m.reads);
            return Ok(m.expr);
        }
        let (mark, loads) = (self.reads.len(), self.buffer_loads);
        let h = self.lower_expr(e)?;
        if self.buffer_loads == loads {
            let reads = self.reads[mark..].to_vec();
            self.memo[e.index()] = Some(Memo { expr: h, reads, scope: self.scope });
        }
        Ok(h)
    }

    fn lower_expr(&mut self, e: Handle<Expr>) -> Result<NExpr, EmitError> {
        let f = self.f;
        Ok(match f.exprs[e] {
            Expr::I32(c) => self.i32(c),
            Expr::F32(x) => {
                if !x.is_finite() {
                    return Err(EmitError::NonFinite(x.to_string()));
                }
                self.flit(x)
            }
            Expr::Var(v) => {
                self.reads.push((v.index(), self.epoch[v.index()]));
                match self.consts[v.index()] {
                    Some(c) => self.i32(c),
                    None => self.read_var(v.index())?,
                }
            }
            Expr::Bin(op, a, b) => {
                let ty = self.types.of(a);
                let (x, y) = (self.expr(a)?, self.expr(b)?);
                if let Some(c) = self.fold(op, x, y) {
                    return Ok(self.i32(c));
                }
                match (op, ty) {
                    (BinOp::Min, _) => self.math(MathFunction::Min, x, y, None),
                    (BinOp::Max, _) => self.math(MathFunction::Max, x, y, None),
                    (BinOp::Lt, _) => {
                        let c = self.bin(NOp::Less, x, y);
                        let (one, zero) = (self.i32(1), self.i32(0));
                        self.add(N::Select { condition: c, accept: one, reject: zero })
                    }
                    (BinOp::Shr, _) => {
                        // A constant amount (the usual case) is one literal.
                        let mut amount = match crate::ir::const_i32(f, b) {
                            Some(c) => self.lit(Literal::U32(c as u32 & 31)),
                            None => {
                                let mask = self.lit(Literal::U32(31));
                                let yu = self.bitcast(y, ScalarKind::Uint);
                                self.bin(NOp::And, yu, mask)
                            }
                        };
                        if ty == Ty::I32 {
                            let xu = self.bitcast(x, ScalarKind::Uint);
                            let r = self.bin(NOp::ShiftRight, xu, amount);
                            self.bitcast(r, ScalarKind::Sint)
                        } else {
                            amount = self.splat(amount);
                            self.bin(NOp::ShiftRight, x, amount)
                        }
                    }
                    _ => {
                        let nop = match op {
                            BinOp::Add => NOp::Add,
                            BinOp::Sub => NOp::Subtract,
                            BinOp::Mul => NOp::Multiply,
                            BinOp::Div => NOp::Divide,
                            BinOp::Rem => NOp::Modulo,
                            BinOp::And => NOp::And,
                            BinOp::Or => NOp::InclusiveOr,
                            BinOp::Min | BinOp::Lt | BinOp::Shr | BinOp::Max => unreachable!("handled above"),
                        };
                        self.bin(nop, x, y)
                    }
                }
            }
            Expr::Fma(a, b, c) => {
                let (x, y, z) = (self.expr(a)?, self.expr(b)?, self.expr(c)?);
                self.math(MathFunction::Fma, x, y, Some(z))
            }
            Expr::Splat(a) => {
                let mut x = self.expr(a)?;
                if self.types.of(a) == Ty::I32 {
                    x = self.bitcast(x, ScalarKind::Uint);
                }
                self.splat(x)
            }
            Expr::ToF32(a) => {
                let mut x = self.expr(a)?;
                if self.types.of(a) == Ty::I32 {
                    x = self.bitcast(x, ScalarKind::Uint);
                }
                self.add(N::As { expr: x, kind: ScalarKind::Float, convert: Some(self.float_width()) })
            }
            Expr::FromBits(a) => {
                let x = self.expr(a)?;
                self.bitcast(x, ScalarKind::Float)
            }
            Expr::SToF32(a) => {
                let x = self.expr(a)?;
                let x = self.bitcast(x, ScalarKind::Sint);
                self.add(N::As { expr: x, kind: ScalarKind::Float, convert: Some(self.float_width()) })
            }
            Expr::DotI16(..) | Expr::ExtendS(..) | Expr::ToI32(_) => unreachable!("CPU-only expression in a verified GPU kernel"),
            Expr::HSum(a) => {
                let x = self.expr(a)?;
                let one = self.flit(1.0);
                let ones = self.splat(one);
                self.math(MathFunction::Dot, x, ones, None)
            }
            Expr::Lane(a, n) => {
                let x = self.expr(a)?;
                let lane = self.add(N::AccessIndex { base: x, index: n as u32 });
                // A `u32x4` lane is an IR `i32`.
                if self.types.of(a) == Ty::U32x4 { self.bitcast(lane, ScalarKind::Sint) } else { lane }
            }
            Expr::Load { ty, buf, index } => {
                self.buffer_loads += 1;
                let flat = self.flat_index(buf, index)?;
                let widen = f.buffers[buf].elem == Elem::F16 && !self.half;
                let v = if ty.lanes() == 1 || self.vec4[buf.index()] {
                    let p = self.pointer(buf, (index, flat), None, ty.lanes())?;
                    self.load(p)
                } else {
                    let mut lanes = Vec::with_capacity(4);
                    for k in 0..4 {
                        let p = self.pointer(buf, (index, flat), (k > 0).then_some(k), 1)?;
                        lanes.push(self.load(p));
                    }
                    if widen {
                        // Widen each lane, then build the f32 vector.
                        for l in &mut lanes {
                            *l = self.add(N::As { expr: *l, kind: ScalarKind::Float, convert: Some(4) });
                        }
                    }
                    let vty = if ty == LoadTy::F32x4 { self.vec4_types[0] } else { self.vec4_types[1] };
                    return Ok(self.add(N::Compose { ty: vty, components: lanes }));
                };
                if ty == LoadTy::U32 {
                    self.bitcast(v, ScalarKind::Sint)
                } else if widen {
                    self.add(N::As { expr: v, kind: ScalarKind::Float, convert: Some(4) })
                } else {
                    v
                }
            }
            Expr::Un(op, a) => {
                let vector = self.types.of(a) == Ty::F32x4;
                let x = self.expr(a)?;
                match op {
                    UnOp::Relu => {
                        let zero = self.fconst(0.0, vector);
                        self.math(MathFunction::Max, x, zero, None)
                    }
                    UnOp::Erf => self.erf(x, vector),
                    UnOp::Abs | UnOp::Round => unreachable!("CPU-only function in a verified GPU kernel"),
                    UnOp::Rsqrt => {
                        let one = self.fconst(1.0, vector);
                        let root = self.add(N::Math { fun: MathFunction::Sqrt, arg: x, arg1: None, arg2: None, arg3: None });
                        self.bin(NOp::Divide, one, root)
                    }
                    UnOp::Silu => {
                        // x / (1 + exp(min(−x, 88))), the fixed swiglu kernel's expression.
                        let neg = self.add(N::Unary { op: naga::UnaryOperator::Negate, expr: x });
                        let cap = self.fconst(88.0, vector);
                        let lim = self.math(MathFunction::Min, neg, cap, None);
                        let e = self.add(N::Math { fun: MathFunction::Exp, arg: lim, arg1: None, arg2: None, arg3: None });
                        let one = self.fconst(1.0, vector);
                        let den = self.bin(NOp::Add, one, e);
                        self.bin(NOp::Divide, x, den)
                    }
                    UnOp::Exp => self.add(N::Math { fun: MathFunction::Exp, arg: x, arg1: None, arg2: None, arg3: None }),
                    UnOp::Recip => {
                        let one = self.fconst(1.0, vector);
                        self.bin(NOp::Divide, one, x)
                    }
                }
            }
            Expr::Compose(lanes) => {
                let mut components = Vec::with_capacity(4);
                for l in lanes {
                    components.push(self.expr(l)?);
                }
                self.add(N::Compose { ty: self.vec4_types[0], components })
            }
            Expr::ShuffleXor(a, m) => {
                let x = self.expr(a)?;
                let mask = crate::ir::const_i32(f, m).expect("verified: a constant mask");
                let mask = self.lit(Literal::U32(mask as u32));
                // Like a load, its value is not reused from the memo.
                self.buffer_loads += 1;
                self.flush();
                let ty = self.scalar_f32;
                let result = self.add(N::SubgroupOperationResult { ty });
                self.emitted = self.exprs.len();
                self.push(Statement::SubgroupGather { mode: naga::GatherMode::ShuffleXor(mask), argument: x, result });
                result
            }
            Expr::Builtin(b) => {
                let (arg, d) = match b {
                    Builtin::LocalId(d) => (self.args[0], d),
                    Builtin::GroupId(d) => (self.args[1], d),
                };
                let c = self.add(N::AccessIndex { base: arg, index: d as u32 });
                self.add(N::As { expr: c, kind: ScalarKind::Sint, convert: Some(4) })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Buffer, Var};

    /// Loads of variable `name` in the entry point's expressions.
    fn loads_of(m: &naga::Module, name: &str) -> usize {
        let f = &m.entry_points[0].function;
        f.expressions
            .iter()
            .filter(|(_, e)| match e {
                N::Load { pointer } => {
                    matches!(f.expressions[*pointer], N::LocalVariable(l) if f.local_variables[l].name.as_deref() == Some(name))
                }
                _ => false,
            })
            .count()
    }

    fn build(f: &Func) -> naga::Module {
        let m = module(f, [1, 1, 1]).unwrap();
        super::super::check(&m).unwrap();
        m
    }

    #[test]
    fn rows_index_by_a_literal_row_where_proven_and_divide_elsewhere() {
        let f = crate::ir::parse::parse(
            "kernel k {
               buf C: f32[64] param 0 rw
               buf V: f32[64] workgroup rw row 16
               buf S: f32[64] workgroup rw row 16
               var t: i32
               t = local_id.x % 4
               store V[local_id.x * 4] = splat(1.0)
               store S[32 + t] = 2.0
               store S[local_id.x * 3] = 3.0
               barrier
               store C[local_id.x * 4] = load.f32x4 V[16 + t * 4]
               store C[local_id.x] = load.f32 S[48 + local_id.x % 16] + load.f32 S[local_id.x + 3]
             }",
        )
        .unwrap();
        let text = super::super::write(&f, [16, 1, 1]).unwrap();
        // Rows of 16 floats: 4 vec4s of V, 16 scalars of S.
        assert!(text.contains("var<workgroup> b_V: array<array<vec4<f32>, 4>, 4>;"), "{text}");
        assert!(text.contains("var<workgroup> b_S: array<array<f32, 16>, 4>;"), "{text}");
        // Proven: row 1 of V at column t (t < 4), rows 2 and 3 of S.
        assert!(text.contains("b_V[1][") && text.contains("b_S[2][") && text.contains("b_S[3]["), "{text}");
        // Not provable (local_id.x·4 reaches 60, ·3 reaches 45, + 3 leaves row 0):
        // the flat index divided by the row, unsigned.
        assert!(text.contains("/ 4u)][") && text.contains("% 4u)]"), "{text}");
        assert_eq!(text.matches("/ 16u)][").count(), 2, "{text}");
    }

    #[test]
    fn f16_arithmetic_refuses_f32_arguments() {
        let src = |elem: &str| format!("kernel k {{ buf A: {elem}[8] param 0 buf C: f16[8] param 1 rw store C[0] = load.f32 A[0] + 1.0 }}");
        let half = crate::ir::parse::parse(&src("f16")).unwrap();
        super::super::check(&module_with(&half, [1, 1, 1], true).unwrap()).unwrap();
        let mixed = crate::ir::parse::parse(&src("f32")).unwrap();
        assert_eq!(module_with(&mixed, [1, 1, 1], true).unwrap_err(), EmitError::HalfArgument("A".into()));
        // Without f16 arithmetic the same function is fine: A is read as f32.
        build(&mixed);
    }

    #[test]
    fn a_variable_is_loaded_again_after_each_store_and_in_each_block() {
        let f = crate::ir::parse::parse(
            "kernel k {
               buf C: f32[8] param 0 rw
               var x: i32
               x = 1
               store C[x] = 1.0
               store C[x + 1] = 2.0
               x = x + 2
               store C[x] = 3.0
               store C[x + 1] = 4.0
               if x < 4 {
                 store C[x] = 5.0
                 x = 0
               }
               store C[x] = 6.0
             }",
        )
        .unwrap();
        // x is read after a branch that sets it, so it is a `var` (see
        // direct_vars). One load serves both stores and `x + 2`; the store
        // to x forces a second, which also serves the `if` condition; the
        // `if` arm is a new block and loads again, and so does the code
        // after it.
        assert_eq!(loads_of(&build(&f), "v_x"), 4);
    }

    #[test]
    fn shared_index_expressions_are_lowered_once_until_a_read_variable_changes() {
        let mut f = Func::new("k");
        let a: Handle<Buffer> = f.buffer("A", Elem::F32, 64, Space::Param(0), false);
        let c = f.buffer("C", Elem::F32, 64, Space::Param(1), true);
        let i: Handle<Var> = f.var("i", Ty::I32);
        let [four, eight, one, two] = [4, 8, 1, 2].map(|v| f.exprs.push(Expr::I32(v)));
        // Values of i that do not fold to literals.
        let lid = f.exprs.push(Expr::Builtin(Builtin::LocalId(0)));
        let lid4 = f.exprs.push(Expr::Bin(BinOp::Add, lid, four));
        let iv = f.exprs.push(Expr::Var(i));
        let prod = f.exprs.push(Expr::Bin(BinOp::Mul, iv, eight));
        let idx1 = f.exprs.push(Expr::Bin(BinOp::Add, prod, one));
        let idx2 = f.exprs.push(Expr::Bin(BinOp::Add, prod, two));
        let ld1 = f.exprs.push(Expr::Load { ty: LoadTy::F32, buf: a, index: idx1 });
        let ld2 = f.exprs.push(Expr::Load { ty: LoadTy::F32, buf: a, index: idx2 });
        f.body = vec![
            Stmt::Set { var: i, value: lid },
            Stmt::Store { buf: c, index: idx1, value: ld1 },
            Stmt::Store { buf: c, index: idx2, value: ld2 },
            Stmt::Store { buf: c, index: idx1, value: ld1 },
            Stmt::Set { var: i, value: lid4 },
            Stmt::Store { buf: c, index: idx1, value: ld1 },
        ];
        let m = build(&f);
        let e = &m.entry_points[0].function.expressions;
        let count = |pred: &dyn Fn(&N) -> bool| e.iter().filter(|(_, x)| pred(x)).count();
        // `i * 8` once per value of i; buffer loads are never reused (a
        // store or barrier may come between), so A is read four times. i is
        // bound to its values (see direct_vars), never loaded.
        assert_eq!(count(&|x| matches!(x, N::Binary { op: NOp::Multiply, .. })), 2);
        assert_eq!(count(&|x| matches!(x, N::Load { .. })), 4);
        assert_eq!(loads_of(&m, "v_i"), 0);
    }

    /// Which variables become `let`s: those read only after a set in the
    /// same block or one around it. A value that may come from a branch or
    /// from an earlier iteration keeps its `var`.
    #[test]
    fn variables_read_after_a_set_in_their_block_become_lets() {
        let f = crate::ir::parse::parse(
            "kernel k {
               buf C: f32[64] param 0 rw
               var a: i32
               var b: i32
               var acc: f32
               var c: i32
               var i: i32
               var u: i32
               var t: f32
               a = 1
               a = a + 1
               acc = 0.0
               c = 0
               for i in 0..4 {
                 b = a + i
                 for u in 0..2 unroll {
                   store C[b + u] = acc
                 }
                 acc = acc + 1.0
                 t = acc
                 store C[b] = t
                 if b < 3 {
                   c = b
                   store C[c] = acc
                 }
               }
               if a < 3 {
                 c = 2
               }
               store C[c] = 2.0
               t = 3.0
               store C[1] = t
             }",
        )
        .unwrap();
        let direct: Vec<(String, bool)> = f.vars.iter().zip(direct_vars(&f)).map(|((_, v), d)| (v.name.clone(), d)).collect();
        let want = [("a", true), ("b", true), ("acc", false), ("c", false), ("i", false), ("u", true), ("t", true)];
        let why = "acc is carried across iterations, c is read after a branch that sets it, i counts; t is set in the loop and after it, each read right after";
        assert_eq!(direct, want.map(|(n, d)| (n.to_string(), d)), "{why}");
        let m = build(&f);
        super::super::check(&m).unwrap();
        let vars: Vec<&str> = m.entry_points[0].function.local_variables.iter().filter_map(|(_, l)| l.name.as_deref()).collect();
        assert_eq!(vars, ["v_acc", "v_c", "v_i"]);
    }
}
