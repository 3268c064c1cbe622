//! A strict reader of GGUF files (versions 2 and 3, little-endian), the
//! container of llama.cpp models: a header, typed metadata (key → value,
//! arrays of any type included), tensor infos, and the tensor data at
//! `general.alignment` (default 32).
//!
//! It reads from a byte slice and never panics on bad input: every length,
//! count and offset is checked against the bytes that are left before it
//! is used, allocations are bounded by the input's size (an array's
//! element count must fit in the bytes that remain; arrays nest at most
//! [`MAX_DEPTH`] deep), and every tensor's data must lie inside the file.
//! Each failure is a [`GgufError`] whose text is one line. It is fuzzed
//! (`fuzz/fuzz_targets/gguf_reader.rs`).
//!
//! The format: <https://github.com/ggml-org/ggml/blob/master/docs/gguf.md>.

use std::fmt;

/// The first four bytes of every GGUF file.
pub const MAGIC: &[u8; 4] = b"GGUF";
/// The data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// How deep arrays of arrays may nest.
pub const MAX_DEPTH: usize = 8;
/// Most dimensions a tensor may have (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: u32 = 4;

/// Why a GGUF file does not read: one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GgufError(pub String);

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GgufError {}

fn err<T>(s: impl Into<String>) -> Result<T, GgufError> {
    Err(GgufError(s.into()))
}

/// A ggml tensor type, by its id in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GgmlType(pub u32);

/// (id, name, elements per block, bytes per block) of every ggml type a
/// GGUF file may hold (ids 4, 5 and 31–33, 36–38 were removed from ggml).
const TYPES: &[(u32, &str, u64, u64)] = &[
    (0, "F32", 1, 4),
    (1, "F16", 1, 2),
    (2, "Q4_0", 32, 18),
    (3, "Q4_1", 32, 20),
    (6, "Q5_0", 32, 22),
    (7, "Q5_1", 32, 24),
    (8, "Q8_0", 32, 34),
    (9, "Q8_1", 32, 36),
    (10, "Q2_K", 256, 84),
    (11, "Q3_K", 256, 110),
    (12, "Q4_K", 256, 144),
    (13, "Q5_K", 256, 176),
    (14, "Q6_K", 256, 210),
    (15, "Q8_K", 256, 292),
    (16, "IQ2_XXS", 256, 66),
    (17, "IQ2_XS", 256, 74),
    (18, "IQ3_XXS", 256, 98),
    (19, "IQ1_S", 256, 50),
    (20, "IQ4_NL", 32, 18),
    (21, "IQ3_S", 256, 110),
    (22, "IQ2_S", 256, 82),
    (23, "IQ4_XS", 256, 136),
    (24, "I8", 1, 1),
    (25, "I16", 1, 2),
    (26, "I32", 1, 4),
    (27, "I64", 1, 8),
    (28, "F64", 1, 8),
    (29, "IQ1_M", 256, 56),
    (30, "BF16", 1, 2),
    (34, "TQ1_0", 256, 54),
    (35, "TQ2_0", 256, 66),
    (39, "MXFP4", 32, 17),
];

impl GgmlType {
    pub const F32: GgmlType = GgmlType(0);
    pub const F16: GgmlType = GgmlType(1);
    pub const Q4_0: GgmlType = GgmlType(2);
    pub const Q4_1: GgmlType = GgmlType(3);
    pub const Q8_0: GgmlType = GgmlType(8);

    fn entry(self) -> Option<&'static (u32, &'static str, u64, u64)> {
        TYPES.iter().find(|t| t.0 == self.0)
    }

    /// ggml's name of the type (`Q4_1`, `Q6_K`, …), or `None` for an unknown id.
    pub fn name(self) -> Option<&'static str> {
        self.entry().map(|t| t.1)
    }

    /// (elements per block, bytes per block), or `None` for an unknown id.
    pub fn block(self) -> Option<(u64, u64)> {
        self.entry().map(|t| (t.2, t.3))
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "type id {}", self.0),
        }
    }
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    Str(String),
    Array(Array),
}

/// A metadata array: every element of one type.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    Str(Vec<String>),
    Array(Vec<Array>),
}

impl Value {
    /// The value as an integer, when it is one of the integer types.
    pub fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(x) => x.into(),
            Value::I8(x) => x.into(),
            Value::U16(x) => x.into(),
            Value::I16(x) => x.into(),
            Value::U32(x) => x.into(),
            Value::I32(x) => x.into(),
            Value::U64(x) => x.into(),
            Value::I64(x) => x.into(),
            _ => return None,
        })
    }

    /// The value as a float, when it is F32 or F64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(x) => Some(x.into()),
            Value::F64(x) => Some(x),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The GGUF name of the value's type (`uint32`, `array of string`, …), for messages.
    pub fn type_name(&self) -> String {
        match self {
            Value::Array(a) => format!("array of {}", a.element_type_name()),
            v => TYPE_NAMES[v.type_id() as usize].to_string(),
        }
    }

    fn type_id(&self) -> u32 {
        match self {
            Value::U8(_) => 0,
            Value::I8(_) => 1,
            Value::U16(_) => 2,
            Value::I16(_) => 3,
            Value::U32(_) => 4,
            Value::I32(_) => 5,
            Value::F32(_) => 6,
            Value::Bool(_) => 7,
            Value::Str(_) => 8,
            Value::Array(_) => 9,
            Value::U64(_) => 10,
            Value::I64(_) => 11,
            Value::F64(_) => 12,
        }
    }
}

/// GGUF value type names by id.
const TYPE_NAMES: [&str; 13] =
    ["uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"];

impl Array {
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::F64(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::Str(v) => v.len(),
            Array::Array(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The GGUF name of the elements' type.
    pub fn element_type_name(&self) -> &'static str {
        match self {
            Array::U8(_) => "uint8",
            Array::I8(_) => "int8",
            Array::U16(_) => "uint16",
            Array::I16(_) => "int16",
            Array::U32(_) => "uint32",
            Array::I32(_) => "int32",
            Array::U64(_) => "uint64",
            Array::I64(_) => "int64",
            Array::F32(_) => "float32",
            Array::F64(_) => "float64",
            Array::Bool(_) => "bool",
            Array::Str(_) => "string",
            Array::Array(_) => "array",
        }
    }

    /// The elements as integers, when they are of an integer type.
    pub fn as_ints(&self) -> Option<Vec<i128>> {
        fn all<T: Copy + Into<i128>>(v: &[T]) -> Vec<i128> {
            v.iter().map(|&x| x.into()).collect()
        }
        Some(match self {
            Array::U8(v) => all(v),
            Array::I8(v) => all(v),
            Array::U16(v) => all(v),
            Array::I16(v) => all(v),
            Array::U32(v) => all(v),
            Array::I32(v) => all(v),
            Array::U64(v) => all(v),
            Array::I64(v) => all(v),
            _ => return None,
        })
    }

    pub fn as_strs(&self) -> Option<&[String]> {
        match self {
            Array::Str(v) => Some(v),
            _ => None,
        }
    }
}

/// One tensor's info. `dims` are ggml's `ne`: `dims[0]` is the fastest
/// (contiguous) dimension, so a 2-D tensor of `dims = [K, N]` is row-major `[N][K]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// Absolute byte offset of the data in the file.
    pub offset: u64,
    /// Bytes of the data.
    pub bytes: u64,
}

impl TensorInfo {
    /// Number of elements.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// A parsed GGUF file: everything but the tensor data, which stays in the
/// caller's bytes ([`Gguf::data`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Gguf {
    pub version: u32,
    /// Alignment of the data section and of every tensor's offset in it.
    pub alignment: u64,
    /// The metadata in file order (keys are unique).
    pub metadata: Vec<(String, Value)>,
    /// The tensor infos in file order (names are unique).
    pub tensors: Vec<TensorInfo>,
    /// Absolute byte offset of the data section.
    pub data_offset: u64,
}

impl Gguf {
    /// The value of metadata key `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The data of tensor `t` in `file` (the bytes this was parsed from).
    pub fn data<'a>(&self, file: &'a [u8], t: &TensorInfo) -> Result<&'a [u8], GgufError> {
        let start = usize::try_from(t.offset).ok();
        let end = t.offset.checked_add(t.bytes).and_then(|e| usize::try_from(e).ok());
        match (start, end) {
            (Some(s), Some(e)) if e <= file.len() => Ok(&file[s..e]),
            _ => err(format!(
                "truncated: tensor {} needs bytes {}..{}, the file has {}",
                t.name,
                t.offset,
                t.offset.saturating_add(t.bytes),
                file.len()
            )),
        }
    }
}

/// A cursor over the file's bytes; every read is checked.
struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn left(&self) -> usize {
        self.b.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &dyn Fn() -> String) -> Result<&'a [u8], GgufError> {
        if n > self.left() {
            return err(format!("truncated at byte {} while reading {} ({n} bytes needed, {} left)", self.pos, what(), self.left()));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N], GgufError> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A count of items of at least `min_size` bytes each: refused when
    /// they could not fit in what is left (so nothing is allocated for them).
    fn count(&mut self, min_size: usize, what: &dyn Fn() -> String) -> Result<usize, GgufError> {
        let n = self.u64(what)?;
        let fits = usize::try_from(n).ok().filter(|&n| n.checked_mul(min_size).is_some_and(|b| b <= self.left()));
        match fits {
            Some(n) => Ok(n),
            None => err(format!(
                "{} claims {n} items of at least {min_size} bytes, but only {} bytes follow (truncated or corrupt)",
                what(),
                self.left()
            )),
        }
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String, GgufError> {
        let n = self.count(1, &|| format!("the length of {}", what()))?;
        let bytes = self.take(n, what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(_) => err(format!("{} is not valid UTF-8", what())),
        }
    }
}

/// Smallest encoded size of one value of GGUF type `ty`, or `None` for an unknown type.
fn min_size(ty: u32) -> Option<usize> {
    Some(match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        10..=12 => 8,
        8 => 8,
        9 => 12,
        _ => return None,
    })
}

fn value(c: &mut Cursor, ty: u32, what: &dyn Fn() -> String, depth: usize) -> Result<Value, GgufError> {
    Ok(match ty {
        0 => Value::U8(c.array::<1>(what)?[0]),
        1 => Value::I8(i8::from_le_bytes(c.array(what)?)),
        2 => Value::U16(u16::from_le_bytes(c.array(what)?)),
        3 => Value::I16(i16::from_le_bytes(c.array(what)?)),
        4 => Value::U32(c.u32(what)?),
        5 => Value::I32(i32::from_le_bytes(c.array(what)?)),
        6 => Value::F32(f32::from_le_bytes(c.array(what)?)),
        7 => Value::Bool(bool_byte(c.array::<1>(what)?[0], what)?),
        8 => Value::Str(c.string(what)?),
        9 => Value::Array(array(c, what, depth)?),
        10 => Value::U64(c.u64(what)?),
        11 => Value::I64(i64::from_le_bytes(c.array(what)?)),
        12 => Value::F64(f64::from_le_bytes(c.array(what)?)),
        t => return err(format!("{} has unknown value type {t}", what())),
    })
}

fn bool_byte(b: u8, what: &dyn Fn() -> String) -> Result<bool, GgufError> {
    match b {
        0 => Ok(false),
        1 => Ok(true),
        b => err(format!("{} is a bool of byte {b} (0 or 1 expected)", what())),
    }
}

fn array(c: &mut Cursor, what: &dyn Fn() -> String, depth: usize) -> Result<Array, GgufError> {
    if depth >= MAX_DEPTH {
        return err(format!("{} nests arrays more than {MAX_DEPTH} deep", what()));
    }
    let ty = c.u32(&|| format!("the element type of {}", what()))?;
    let Some(min) = min_size(ty) else { return err(format!("{} has unknown element type {ty}", what())) };
    let n = c.count(min, &|| what())?;
    let item = |i: usize| move || format!("element {i} of {}", what());
    macro_rules! fixed {
        ($variant:ident, $t:ty) => {{
            let bytes = c.take(n * std::mem::size_of::<$t>(), what)?;
            Array::$variant(
                bytes.chunks_exact(std::mem::size_of::<$t>()).map(|ch| <$t>::from_le_bytes(ch.try_into().unwrap_or_default())).collect(),
            )
        }};
    }
    Ok(match ty {
        0 => Array::U8(c.take(n, what)?.to_vec()),
        1 => fixed!(I8, i8),
        2 => fixed!(U16, u16),
        3 => fixed!(I16, i16),
        4 => fixed!(U32, u32),
        5 => fixed!(I32, i32),
        6 => fixed!(F32, f32),
        7 => Array::Bool(c.take(n, what)?.iter().enumerate().map(|(i, &b)| bool_byte(b, &item(i))).collect::<Result<_, _>>()?),
        8 => {
            let mut v = Vec::with_capacity(n);
            for i in 0..n {
                v.push(c.string(&item(i))?);
            }
            Array::Str(v)
        }
        9 => {
            let mut v = Vec::with_capacity(n);
            for i in 0..n {
                v.push(array(c, &item(i), depth + 1)?);
            }
            Array::Array(v)
        }
        10 => fixed!(U64, u64),
        11 => fixed!(I64, i64),
        12 => fixed!(F64, f64),
        _ => return err(format!("{} has unknown element type {ty}", what())),
    })
}

/// Parses the header, metadata and tensor infos of the GGUF file `file`
/// and checks that every tensor's data lies inside it.
pub fn parse(file: &[u8]) -> Result<Gguf, GgufError> {
    let mut c = Cursor { b: file, pos: 0 };
    let magic = c.array::<4>(&|| "the magic".to_string())?;
    if &magic != MAGIC {
        return err(format!("not a GGUF file: it starts with {magic:02x?}, not \"GGUF\""));
    }
    let version = c.u32(&|| "the version".to_string())?;
    match version {
        2 | 3 => {}
        1 => return err("GGUF version 1 is not supported; webtune reads versions 2 and 3 (convert the file with a recent llama.cpp)"),
        v if v.swap_bytes() == 2 || v.swap_bytes() == 3 => {
            return err("big-endian GGUF is not supported; webtune reads little-endian files");
        }
        v => return err(format!("unknown GGUF version {v}; webtune reads versions 2 and 3")),
    }
    // A tensor info is at least 24 bytes (empty name, 0 dims); a key-value pair 13.
    let n_tensors = c.count(24, &|| "the header's tensor count".to_string())?;
    let n_kv = c.count(13, &|| "the header's metadata count".to_string())?;
    let mut metadata: Vec<(String, Value)> = Vec::with_capacity(n_kv);
    let mut keys = std::collections::HashSet::new();
    for i in 0..n_kv {
        let key = c.string(&|| format!("metadata key {i}"))?;
        let ty = c.u32(&|| format!("the type of metadata `{key}`"))?;
        let v = value(&mut c, ty, &|| format!("metadata `{key}`"), 0)?;
        if !keys.insert(key.clone()) {
            return err(format!("metadata key `{key}` appears twice"));
        }
        metadata.push((key, v));
    }
    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some((_, Value::U32(a))) if a.is_power_of_two() => u64::from(*a),
        Some((_, v)) => return err(format!("general.alignment must be a uint32 power of two, got {v:?}")),
    };
    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(n_tensors);
    let mut names = std::collections::HashSet::new();
    for i in 0..n_tensors {
        let name = c.string(&|| format!("the name of tensor {i}"))?;
        let n_dims = c.u32(&|| format!("the dimension count of tensor {name}"))?;
        if n_dims > MAX_DIMS {
            return err(format!("tensor {name} has {n_dims} dimensions; GGUF allows at most {MAX_DIMS}"));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for d in 0..n_dims {
            dims.push(c.u64(&|| format!("dimension {d} of tensor {name}"))?);
        }
        let ty = GgmlType(c.u32(&|| format!("the type of tensor {name}"))?);
        let offset = c.u64(&|| format!("the offset of tensor {name}"))?;
        let Some((block_elems, block_bytes)) = ty.block() else {
            return err(format!("tensor {name} has unknown ggml type id {}", ty.0));
        };
        let elements = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let Some(elements) = elements.filter(|&e| e <= 1 << 48) else {
            return err(format!("tensor {name} has dimensions {dims:?}: too many elements"));
        };
        let row = dims.first().copied().unwrap_or(1);
        if !row.is_multiple_of(block_elems) {
            return err(format!("tensor {name} of type {ty} has rows of {row} elements, not a multiple of its block of {block_elems}"));
        }
        if !offset.is_multiple_of(alignment) {
            return err(format!("tensor {name} has offset {offset}, not a multiple of the alignment {alignment}"));
        }
        if !names.insert(name.clone()) {
            return err(format!("tensor {name} appears twice"));
        }
        // Relative for now; made absolute once the data section is known.
        tensors.push(TensorInfo { name, dims, ty, offset, bytes: elements / block_elems * block_bytes });
    }
    let data_offset = (c.pos as u64).div_ceil(alignment).saturating_mul(alignment);
    for t in &mut tensors {
        let start = data_offset.checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(t.bytes));
        match (start, end) {
            (Some(s), Some(e)) if e <= file.len() as u64 => t.offset = s,
            _ => {
                return err(format!(
                    "truncated: tensor {} needs bytes {}..{} of the file, which has {}",
                    t.name,
                    data_offset.saturating_add(t.offset),
                    data_offset.saturating_add(t.offset).saturating_add(t.bytes),
                    file.len()
                ));
            }
        }
    }
    Ok(Gguf { version, alignment, metadata, tensors, data_offset })
}

/// The f32 values of a tensor's data of type F32, F16, Q4_0, Q4_1 or Q8_0
/// (ggml's block layouts; every value is exactly f32-representable:
/// Q4_1's `d·q + m` is rounded once, as ggml does), in file order.
/// `None` for any other type or data of the wrong length.
pub fn dequantize(ty: GgmlType, data: &[u8]) -> Option<Vec<f32>> {
    let f16 = |b: &[u8]| half::f16::from_le_bytes([b[0], b[1]]).to_f32();
    let (_, block) = ty.block()?;
    if !(data.len() as u64).is_multiple_of(block) {
        return None;
    }
    Some(match ty {
        GgmlType::F32 => data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        GgmlType::F16 => data.chunks_exact(2).map(f16).collect(),
        GgmlType::Q4_0 | GgmlType::Q4_1 => {
            let mut out = Vec::with_capacity(data.len() / block as usize * 32);
            for b in data.chunks_exact(block as usize) {
                let d = f16(&b[0..2]);
                let (m, qs) = if ty == GgmlType::Q4_1 { (f16(&b[2..4]), &b[4..20]) } else { (0.0, &b[2..18]) };
                let value = |q: u8| if ty == GgmlType::Q4_1 { d * f32::from(q) + m } else { d * (f32::from(q) - 8.0) };
                out.extend(qs.iter().map(|&q| value(q & 15)));
                out.extend(qs.iter().map(|&q| value(q >> 4)));
            }
            out
        }
        GgmlType::Q8_0 => {
            let mut out = Vec::with_capacity(data.len() / 34 * 32);
            for b in data.chunks_exact(34) {
                let d = f16(&b[0..2]);
                out.extend(b[2..].iter().map(|&q| d * f32::from(q as i8)));
            }
            out
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(version: u32, n_tensors: u64, n_kv: u64) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend(version.to_le_bytes());
        b.extend(n_tensors.to_le_bytes());
        b.extend(n_kv.to_le_bytes());
        b
    }

    #[test]
    fn huge_counts_are_refused_before_allocating() {
        let e = parse(&header(3, u64::MAX, 0)).unwrap_err().0;
        assert!(e.contains("tensor count claims"), "{e}");
        let mut b = header(3, 0, 1);
        b.extend(3u64.to_le_bytes());
        b.extend(b"key");
        b.extend(9u32.to_le_bytes());
        b.extend(8u32.to_le_bytes());
        b.extend((1u64 << 60).to_le_bytes());
        let e = parse(&b).unwrap_err().0;
        assert!(e.starts_with("metadata `key` claims 1152921504606846976 items"), "{e}");
    }

    #[test]
    fn versions_and_magic() {
        assert!(parse(&header(1, 0, 0)).unwrap_err().0.contains("version 1 is not supported"));
        assert!(parse(&header(3u32.swap_bytes(), 0, 0)).unwrap_err().0.contains("big-endian"));
        assert!(parse(b"GGML....").unwrap_err().0.starts_with("not a GGUF file"));
        assert!(parse(b"GG").unwrap_err().0.starts_with("truncated at byte 0 while reading the magic"));
        let g = parse(&header(2, 0, 0)).unwrap();
        assert_eq!((g.version, g.alignment, g.data_offset), (2, 32, 32));
    }

    #[test]
    fn nested_arrays_are_bounded() {
        let mut b = header(3, 0, 1);
        b.extend(1u64.to_le_bytes());
        b.extend(b"k");
        b.extend(9u32.to_le_bytes());
        for _ in 0..MAX_DEPTH + 1 {
            b.extend(9u32.to_le_bytes());
            b.extend(1u64.to_le_bytes());
        }
        b.extend(vec![0u8; 64]);
        let e = parse(&b).unwrap_err().0;
        assert!(e.contains("nests arrays more than 8 deep"), "{e}");
    }

    #[test]
    fn dequantize_blocks() {
        // Q4_0: d = 2 (f16 0x4000), qs[0] = 0x9f → weights 0 and 16 are q = 15 and 9.
        let mut b = vec![0x00, 0x40, 0x9f];
        b.extend([0x88; 15]);
        let v = dequantize(GgmlType::Q4_0, &b).unwrap();
        assert_eq!((v[0], v[16], v[1], v[17]), (14.0, 2.0, 0.0, 0.0));
        // Q8_0: d = 0.5 (0x3800), q = -4.
        let mut b = vec![0x00, 0x38];
        b.extend([0xfc; 32]);
        assert_eq!(dequantize(GgmlType::Q8_0, &b).unwrap(), vec![-2.0; 32]);
        assert_eq!(dequantize(GgmlType(14), &[0; 210]), None);
        assert_eq!(dequantize(GgmlType::Q8_0, &[0; 33]), None);
    }
}
