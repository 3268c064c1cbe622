//! WGSL kernels through wgpu. The kernel's arguments are bound at
//! `@group(0) @binding(i)` in ABI order; the runner dispatches
//! `meta.dispatch` workgroups, or each of `meta.passes` in order with a
//! scratch buffer at `@group(1) @binding(0)` (ABI 3). Shader modules are created with wgpu's
//! default runtime checks (bounds checks on), as browsers do.

use std::sync::Arc;
use std::time::Instant;

use wgpu::util::DeviceExt as _;

use crate::{KernelDir, RunError, RunOptions, RunReport, Timing, calls_for, prepare, report, samples_of};
use webtune_compiler::reference;
use webtune_compiler::{Op, Target, compile};

/// One wgpu device, reusable across many kernels.
#[derive(Debug)]
pub struct Gpu {
    pub adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    timestamps: bool,
    /// Whether shaders get wgpu's runtime bounds checks (on, as in browsers).
    bounds_checks: bool,
}

/// A kernel ready to dispatch: pipeline, bound buffers and launch shape.
#[derive(Debug)]
pub struct Prepared {
    /// Each pass's pipeline and workgroup counts, in order (one for ABI 1).
    passes: Vec<(wgpu::ComputePipeline, [u32; 3])>,
    bind: wgpu::BindGroup,
    /// The scratch buffer's bind group (group 1) of a kernel with passes.
    scratch: Option<wgpu::BindGroup>,
    output: wgpu::Buffer,
    readback: wgpu::Buffer,
    out_bytes: u64,
    /// The output's element type: f16 outputs are widened to f32 words on reading.
    out: webtune_compiler::op::ArgSpec,
    /// Time to create the module and pipeline (the driver's compile).
    pub compile_ms: f64,
}

impl Gpu {
    /// The default adapter of the environment (`WGPU_BACKEND`, `WGPU_ADAPTER_NAME`
    /// are honoured), with `TIMESTAMP_QUERY`, `SUBGROUP` and `SHADER_F16`
    /// where it has them, and default limits.
    pub fn new() -> Result<Gpu, RunError> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        }))
        .map_err(|e| RunError::NoEngine(format!("no wgpu adapter ({e}); on Linux install mesa-vulkan-drivers for lavapipe")))?;
        let timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        // Timestamps, subgroup operations and f16, where the adapter has them.
        let required_features =
            adapter.features() & (wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::SUBGROUP | wgpu::Features::SHADER_F16);
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("webtune"),
            required_features,
            required_limits: wgpu::Limits::default(),
            ..Default::default()
        }))
        .map_err(|e| RunError::NoEngine(format!("wgpu device: {e}")))?;
        // Errors are captured by error scopes around each step; anything that
        // slips past them is logged rather than aborting the process.
        device.on_uncaptured_error(Arc::new(|e| eprintln!("wgpu: uncaptured error: {e}")));
        Ok(Gpu { adapter, device, queue, timestamps, bounds_checks: true })
    }

    /// Adapter name and backend, e.g. `NVIDIA H100 80GB HBM3 (Vulkan)`.
    pub fn adapter_name(&self) -> String {
        let i = self.adapter.get_info();
        format!("{} ({:?})", i.name, i.backend)
    }

    pub fn has_timestamps(&self) -> bool {
        self.timestamps
    }

    /// Turns wgpu's runtime bounds checks off (or back on) for kernels the
    /// compiler generated. They are on by default, as every browser has them;
    /// off only measures what they cost. [`Self::prepare`] drops them only
    /// for a kernel whose bytes are exactly what `compile` makes of its own
    /// `kernel.json` (the generator clamps every index itself); any other
    /// source, and every [`Self::prepare_source`] call, keeps them. Loop
    /// bounding stays on either way.
    pub fn set_bounds_checks(&mut self, on: bool) {
        self.bounds_checks = on;
    }

    fn scoped<T>(&self, what: &str, f: impl FnOnce() -> T) -> Result<T, RunError> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let v = f();
        match pollster::block_on(scope.pop()) {
            None => Ok(v),
            Some(e) => Err(RunError::Engine(format!("{what}: {e}"))),
        }
    }

    /// Whether the device has subgroup operations, and the fewest
    /// invocations a subgroup of this adapter has.
    pub fn subgroups(&self) -> Option<u32> {
        self.device.features().contains(wgpu::Features::SUBGROUP).then(|| self.adapter.get_info().subgroup_min_size)
    }

    /// Creates the pipeline and buffers of `k` with `inputs` uploaded and the
    /// output poisoned.
    pub fn prepare(&self, k: &KernelDir, inputs: &reference::Inputs) -> Result<Prepared, RunError> {
        if k.meta.target != Target::Wgsl {
            return Err(RunError::Input(format!("a {} kernel given to the WGSL runner", k.meta.target)));
        }
        crate::check_abi(&k.meta)?;
        // Whether the adapter has subgroups at all, `prepare_source` checks
        // from the text; here, whether they are wide enough.
        if let (Some(need), Some(min)) = (k.meta.min_subgroup_size, self.subgroups())
            && min < need
        {
            return Err(RunError::Input(format!(
                "the kernel needs subgroups of at least {need} invocations; this adapter's may have {min}"
            )));
        }
        let source = std::str::from_utf8(&k.bytes).map_err(|_| RunError::Input("kernel.wgsl is not UTF-8".into()))?;
        let dispatch = k.meta.dispatch.ok_or_else(|| RunError::Input("kernel.json of a WGSL kernel has no `dispatch`".into()))?;
        let passes: Vec<(&str, [u32; 3])> = match &k.meta.passes {
            Some(p) if p.is_empty() => return Err(RunError::Input("kernel.json lists no `passes`".into())),
            Some(p) => p.iter().map(|p| (p.entry.as_str(), p.dispatch)).collect(),
            None => vec![(k.meta.entry.as_str(), dispatch)],
        };
        let scratch = if k.meta.passes.is_some() { k.meta.scratch_bytes.unwrap_or(0) as u64 } else { 0 };
        let checks = self.bounds_checks || !compiler_made(k);
        let (args, out) = op_bytes(&k.op()?, inputs)?;
        self.prepare_with(source, &passes, scratch, &args, out, checks)
    }

    /// Whether the device has the `shader-f16` feature (f16 kernels need it).
    pub fn has_f16(&self) -> bool {
        self.device.features().contains(wgpu::Features::SHADER_F16)
    }

    /// Measurement only (see [`Self::set_bounds_checks`]); reached only for
    /// a kernel that [`compiler_made`] vouches for.
    #[allow(unsafe_code)]
    fn module_without_bounds_checks(&self, desc: wgpu::ShaderModuleDescriptor) -> wgpu::ShaderModule {
        let checks = wgpu::ShaderRuntimeChecks { bounds_checks: false, ..wgpu::ShaderRuntimeChecks::checked() };
        // SAFETY: only bounds checks are dropped (loops stay bounded). The
        // caller has shown that the source is byte for byte what the
        // compiler generates for its op, shape and schedule: the generator
        // clamps every global index itself, its IR verifier proved every
        // constant-bounded index in range, and naga validated the module.
        unsafe { self.device.create_shader_module_trusted(desc, checks) }
    }

    /// [`Self::prepare`] for any WGSL source whose bindings are `args` in
    /// order, the last one the output (which is poisoned). wgpu's runtime
    /// bounds checks are always on here, whatever [`Self::set_bounds_checks`]
    /// says: nothing vouches for a hand-written source.
    pub fn prepare_source(&self, source: &str, entry: &str, dispatch: [u32; 3], args: &[Vec<u32>]) -> Result<Prepared, RunError> {
        let bytes: Vec<Vec<u8>> = args.iter().map(|a| bytemuck::cast_slice(a).to_vec()).collect();
        let out = webtune_compiler::op::ArgSpec {
            name: "C",
            dtype: webtune_compiler::op::Dtype::F32,
            shape: vec![args[args.len() - 1].len() as u32],
        };
        self.prepare_with(source, &[(entry, dispatch)], 0, &bytes, out, true)
    }

    /// [`Self::prepare_source`] for a source that computes `op` (an f16 op's
    /// arguments travel as f16), with wgpu's bounds checks on.
    pub fn prepare_op_source(&self, source: &str, dispatch: [u32; 3], op: &Op, inputs: &reference::Inputs) -> Result<Prepared, RunError> {
        let (args, out) = op_bytes(op, inputs)?;
        self.prepare_with(source, &[("main", dispatch)], 0, &args, out, true)
    }

    /// Creates the pipelines of `passes` (entry point, workgroup counts),
    /// in order, and binds `args` (the last one the output, poisoned) at
    /// group 0 and, where `scratch` is non-zero, a scratch buffer of that
    /// many bytes at group 1. A one-pass kernel without scratch gets the
    /// layout wgpu derives from its entry point; a kernel with passes gets
    /// the ABI's explicit layout (inputs read-only, the output read-write),
    /// since each pass uses only some of the bindings.
    fn prepare_with(
        &self,
        source: &str,
        passes: &[(&str, [u32; 3])],
        scratch: u64,
        args: &[Vec<u8>],
        out: webtune_compiler::op::ArgSpec,
        checks: bool,
    ) -> Result<Prepared, RunError> {
        let limit = self.device.limits().max_compute_workgroups_per_dimension;
        for (_, dispatch) in passes {
            if dispatch.iter().any(|&d| d == 0 || d > limit) {
                return Err(RunError::Input(format!("dispatch {dispatch:?} is outside 1..={limit} per dimension")));
            }
        }
        let max = self.device.limits().max_storage_buffer_binding_size;
        if scratch > max {
            return Err(RunError::Input(format!("the kernel needs {scratch} bytes of scratch; this device binds at most {max}")));
        }
        if webtune_compiler::wgsl::needs_subgroups(source) && self.subgroups().is_none() {
            return Err(RunError::Input("the kernel uses subgroup operations; this adapter has no `subgroups` feature".into()));
        }
        if webtune_compiler::wgsl::needs_f16(source) && !self.has_f16() {
            return Err(RunError::Input("the kernel uses f16; this adapter has no `shader-f16` feature (use the f32 op)".into()));
        }
        let source = webtune_compiler::wgsl::native_source(source);
        let t0 = Instant::now();
        let explicit = passes.len() > 1 || scratch > 0;
        let storage = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let layouts = explicit.then(|| {
            let last = args.len() as u32 - 1;
            let entries: Vec<_> = (0..=last).map(|i| storage(i, i != last)).collect();
            let group0 =
                self.device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some("arguments"), entries: &entries });
            let group1 = self
                .device
                .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some("scratch"), entries: &[storage(0, false)] });
            (group0, group1)
        });
        let pipeline_layout = layouts.as_ref().map(|(g0, g1)| {
            let groups = if scratch > 0 { vec![Some(g0), Some(g1)] } else { vec![Some(g0)] };
            self.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("kernel"),
                bind_group_layouts: &groups,
                immediate_size: 0,
            })
        });
        let pipelines = self.scoped("shader module and pipelines", || {
            let desc = wgpu::ShaderModuleDescriptor { label: Some("kernel"), source: wgpu::ShaderSource::Wgsl(source.into()) };
            let module = if checks { self.device.create_shader_module(desc) } else { self.module_without_bounds_checks(desc) };
            passes
                .iter()
                .map(|&(entry, dispatch)| {
                    let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some(entry),
                        layout: pipeline_layout.as_ref(),
                        module: &module,
                        entry_point: Some(entry),
                        compilation_options: Default::default(),
                        cache: None,
                    });
                    (pipeline, dispatch)
                })
                .collect::<Vec<_>>()
        })?;
        let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
        let last = args.len() - 1;
        let buffers: Vec<wgpu::Buffer> = args
            .iter()
            .enumerate()
            .map(|(i, a)| {
                // Bytes are little-endian, as wgpu targets are (see
                // `reference::arg_bytes`); an odd count of f16 values is
                // padded to whole words, as buffer copies need.
                let mut bytes = a.clone();
                bytes.resize(a.len().next_multiple_of(4), 0);
                let usage = if i == last {
                    wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST
                } else {
                    wgpu::BufferUsages::STORAGE
                };
                self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor { label: None, contents: &bytes, usage })
            })
            .collect();
        let out_bytes = args[last].len().next_multiple_of(4) as u64;
        let readback = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: out_bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let bind = self.scoped("bind group (the kernel's bindings must be the op's arguments in ABI order)", || {
            let entries: Vec<wgpu::BindGroupEntry> = buffers
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() })
                .collect();
            let layout = match &layouts {
                Some((g0, _)) => g0.clone(),
                None => pipelines[0].0.get_bind_group_layout(0),
            };
            self.device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &layout, entries: &entries })
        })?;
        let scratch = match (&layouts, scratch) {
            (Some((_, g1)), bytes) if bytes > 0 => Some(self.scoped("scratch buffer", || {
                // Poisoned (every word a NaN), so that a partial sum the
                // first pass failed to write shows in the output.
                let buffer = self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some("scratch"),
                    contents: &vec![0xff; bytes.next_multiple_of(4) as usize],
                    usage: wgpu::BufferUsages::STORAGE,
                });
                self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("scratch"),
                    layout: g1,
                    entries: &[wgpu::BindGroupEntry { binding: 0, resource: buffer.as_entire_binding() }],
                })
            })?),
            _ => None,
        };
        let output = buffers.into_iter().nth(last).expect("ops have an output");
        Ok(Prepared { passes: pipelines, bind, scratch, output, readback, out_bytes, out, compile_ms })
    }

    fn encode_calls(&self, enc: &mut wgpu::CommandEncoder, p: &Prepared, calls: u32, ts: Option<(&wgpu::QuerySet, u32)>) {
        let timestamp_writes = ts.map(|(q, i)| wgpu::ComputePassTimestampWrites {
            query_set: q,
            beginning_of_pass_write_index: Some(i),
            end_of_pass_write_index: Some(i + 1),
        });
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes });
        pass.set_bind_group(0, &p.bind, &[]);
        if let Some(scratch) = &p.scratch {
            pass.set_bind_group(1, scratch, &[]);
        }
        match p.passes.as_slice() {
            // One pass: its pipeline is set once, as before passes existed.
            [(pipeline, d)] => {
                pass.set_pipeline(pipeline);
                for _ in 0..calls {
                    pass.dispatch_workgroups(d[0], d[1], d[2]);
                }
            }
            passes => {
                for _ in 0..calls {
                    for (pipeline, d) in passes {
                        pass.set_pipeline(pipeline);
                        pass.dispatch_workgroups(d[0], d[1], d[2]);
                    }
                }
            }
        }
    }

    fn wait(&self) -> Result<(), RunError> {
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| RunError::Engine(format!("device poll: {e}")))?;
        Ok(())
    }

    fn read(&self, buf: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>, RunError> {
        let slice = buf.slice(..bytes);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.wait()?;
        rx.recv()
            .map_err(|_| RunError::Engine("buffer map callback never ran".into()))?
            .map_err(|e| RunError::Engine(format!("buffer map: {e}")))?;
        let data = slice.get_mapped_range().map_err(|e| RunError::Engine(format!("mapped range: {e}")))?.to_vec();
        buf.unmap();
        Ok(data)
    }

    /// One call on the poisoned output, read back as words.
    pub fn output(&self, p: &Prepared) -> Result<Vec<u32>, RunError> {
        let mut enc = self.device.create_command_encoder(&Default::default());
        self.encode_calls(&mut enc, p, 1, None);
        enc.copy_buffer_to_buffer(&p.output, 0, &p.readback, 0, p.out_bytes);
        self.scoped("dispatch", || self.queue.submit([enc.finish()]))?;
        let bytes = self.read(&p.readback, p.out_bytes)?;
        let mut words = reference::arg_words(&p.out, &bytes);
        words.truncate(p.out.elems() as usize);
        Ok(words)
    }

    /// Per-call times of `reps` samples of `calls` back-to-back dispatches.
    /// Everything the samples need (command buffers, query set, buffers) is
    /// made before the first one starts.
    pub fn time(&self, p: &Prepared, opts: &RunOptions) -> Result<Timing, RunError> {
        for _ in 0..opts.warmup.max(1) {
            let mut enc = self.device.create_command_encoder(&Default::default());
            self.encode_calls(&mut enc, p, 1, None);
            self.queue.submit([enc.finish()]);
        }
        self.wait()?;
        let reps = opts.reps.max(1);
        if self.timestamps {
            let one = self.timestamp_samples(p, 1, 3)?;
            let calls = calls_for(one.iter().copied().fold(f64::INFINITY, f64::min), opts.min_sample_ms);
            self.busy(p, calls, opts.warmup_ms)?;
            let samples_ms = self.timestamp_samples(p, calls, reps)?;
            Ok(Timing { samples_ms, calls, timer: "gpu-timestamp", compile_ms: p.compile_ms })
        } else {
            let one = self.wall_samples(p, 1, 3)?;
            let calls = calls_for(one.iter().copied().fold(f64::INFINITY, f64::min), opts.min_sample_ms.max(10.0));
            self.busy(p, calls, opts.warmup_ms)?;
            let samples_ms = self.wall_samples(p, calls, reps)?;
            Ok(Timing { samples_ms, calls, timer: "wall-clock", compile_ms: p.compile_ms })
        }
    }

    /// Runs batches of `calls` dispatches until at least `ms` of wall time
    /// passed, so that the device's clocks have risen from idle.
    fn busy(&self, p: &Prepared, calls: u32, ms: f64) -> Result<(), RunError> {
        let t = Instant::now();
        while t.elapsed().as_secs_f64() * 1e3 < ms {
            let mut enc = self.device.create_command_encoder(&Default::default());
            self.encode_calls(&mut enc, p, calls, None);
            self.queue.submit([enc.finish()]);
            self.wait()?;
        }
        Ok(())
    }

    fn timestamp_samples(&self, p: &Prepared, calls: u32, reps: usize) -> Result<Vec<f64>, RunError> {
        let count = 2 * reps as u32;
        let qs = self.device.create_query_set(&wgpu::QuerySetDescriptor { label: None, ty: wgpu::QueryType::Timestamp, count });
        let size = count as u64 * 8;
        let resolve = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let read = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let cmds: Vec<wgpu::CommandBuffer> = (0..reps)
            .map(|r| {
                let mut enc = self.device.create_command_encoder(&Default::default());
                self.encode_calls(&mut enc, p, calls, Some((&qs, 2 * r as u32)));
                enc.finish()
            })
            .collect();
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.resolve_query_set(&qs, 0..count, &resolve, 0);
        enc.copy_buffer_to_buffer(&resolve, 0, &read, 0, size);
        let tail = enc.finish();
        // Timed region: the GPU's own clock around each sample's pass.
        for c in cmds {
            self.queue.submit([c]);
        }
        self.queue.submit([tail]);
        let bytes = self.read(&read, size)?;
        let period = self.queue.get_timestamp_period() as f64;
        let ticks: Vec<u64> = bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
        Ok(ticks.chunks_exact(2).map(|t| t[1].saturating_sub(t[0]) as f64 * period * 1e-6 / calls as f64).collect())
    }

    fn wall_samples(&self, p: &Prepared, calls: u32, reps: usize) -> Result<Vec<f64>, RunError> {
        let mut cmds: Vec<wgpu::CommandBuffer> = (0..reps)
            .map(|_| {
                let mut enc = self.device.create_command_encoder(&Default::default());
                self.encode_calls(&mut enc, p, calls, None);
                enc.finish()
            })
            .collect();
        let mut out = Vec::with_capacity(reps);
        for c in cmds.drain(..) {
            let t = Instant::now();
            self.queue.submit([c]);
            self.wait()?;
            out.push(t.elapsed().as_secs_f64() * 1e3 / calls as f64);
        }
        Ok(out)
    }

    /// Checks `k` against the reference, then times it.
    pub fn run(&self, k: &KernelDir, opts: &RunOptions) -> Result<RunReport, RunError> {
        let op = k.op()?;
        let prepared = prepare(&op, opts.seed);
        let (inputs, want) = &*prepared;
        let p = self.prepare(k, inputs)?;
        let out = self.output(&p)?;
        let check = want.check(&out);
        let samples = samples_of(&out, &opts.sample_positions);
        if !check.ok() {
            let t = Timing { samples_ms: vec![], calls: 0, timer: "none", compile_ms: p.compile_ms };
            return Ok(report(k, &op, self.adapter_name(), check, t, samples));
        }
        let t = self.time(&p, opts)?;
        Ok(report(k, &op, self.adapter_name(), check, t, samples))
    }
}

/// `op`'s argument bytes as a kernel reads them (f16 arguments as f16,
/// [`reference::arg_bytes`]) and the output's spec.
fn op_bytes(op: &Op, inputs: &reference::Inputs) -> Result<(Vec<Vec<u8>>, webtune_compiler::op::ArgSpec), RunError> {
    let mut specs = op.args();
    if specs.len() != inputs.args.len() {
        return Err(RunError::Input(format!("{} takes {} arguments, got {}", op.name(), specs.len(), inputs.args.len())));
    }
    let args = specs.iter().zip(&inputs.args).map(|(s, w)| reference::arg_bytes(s, w)).collect();
    Ok((args, specs.pop().expect("ops have an output")))
}

/// Whether `k`'s bytes are exactly what the compiler generates for the op,
/// shape and schedule its `kernel.json` names: the one condition under which
/// a kernel may run without wgpu's bounds checks.
fn compiler_made(k: &KernelDir) -> bool {
    let Ok(op) = Op::from_name(&k.meta.op, &k.meta.shape) else { return false };
    compile(&op, Target::Wgsl, &k.meta.config).is_ok_and(|c| c.bytes == k.bytes)
}

/// Lower-case vendor name of a PCI vendor id, as browsers spell
/// `GPUAdapterInfo.vendor`; empty when unknown (browsers hide it too).
pub fn vendor_name(id: u32) -> &'static str {
    match id {
        0x10de => "nvidia",
        0x1002 | 0x1022 => "amd",
        0x8086 => "intel",
        0x106b => "apple",
        0x13b5 => "arm",
        0x5143 => "qualcomm",
        0x1010 => "imagination",
        0x10005 => "mesa",
        _ => "",
    }
}

impl Gpu {
    /// This adapter as a WebGPU client would describe it (`GPUAdapterInfo`,
    /// `GPUSupportedLimits` with the browser's camelCase names, `features`),
    /// for `POST /v1/sessions`. Limits are the device's, i.e. what a kernel
    /// run here may use, not the adapter's maxima.
    pub fn fingerprint(&self) -> serde_json::Value {
        let i = self.adapter.get_info();
        let l = self.device.limits();
        let mut features = Vec::new();
        if self.timestamps {
            features.push("timestamp-query");
        }
        let af = self.adapter.features();
        if af.contains(wgpu::Features::SHADER_F16) {
            features.push("shader-f16");
        }
        if af.contains(wgpu::Features::SUBGROUP) {
            features.push("subgroups");
        }
        let vendor = vendor_name(i.vendor);
        // Software rasterisers name their architecture in the device name.
        let lower = i.name.to_lowercase();
        let architecture = if lower.contains("llvmpipe") {
            "llvmpipe"
        } else if lower.contains("swiftshader") {
            "swiftshader"
        } else {
            ""
        };
        serde_json::json!({
            "adapter": {
                "vendor": vendor,
                "architecture": architecture,
                "device": format!("{:04x}", i.device),
                "description": i.name,
                "subgroupMinSize": self.adapter.get_info().subgroup_min_size,
                "subgroupMaxSize": self.adapter.get_info().subgroup_max_size,
            },
            "limits": {
                "maxComputeInvocationsPerWorkgroup": l.max_compute_invocations_per_workgroup,
                "maxComputeWorkgroupStorageSize": l.max_compute_workgroup_storage_size,
                "maxComputeWorkgroupSizeX": l.max_compute_workgroup_size_x,
                "maxComputeWorkgroupSizeY": l.max_compute_workgroup_size_y,
                "maxComputeWorkgroupSizeZ": l.max_compute_workgroup_size_z,
                "maxComputeWorkgroupsPerDimension": l.max_compute_workgroups_per_dimension,
                "maxStorageBuffersPerShaderStage": l.max_storage_buffers_per_shader_stage,
                "maxStorageBufferBindingSize": l.max_storage_buffer_binding_size,
                "maxBufferSize": l.max_buffer_size,
            },
            "features": features,
            "browser": {"name": "webtune-native", "version": env!("CARGO_PKG_VERSION")},
            "os": std::env::consts::OS,
            "backend": format!("{:?}", i.backend).to_lowercase(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use webtune_compiler::Schedule;

    #[test]
    fn only_generated_kernels_may_drop_bounds_checks() {
        let op = Op::parse("matmul", "67,129,65").unwrap();
        let k = compile(&op, Target::Wgsl, &Schedule::default_for(&op, Target::Wgsl)).unwrap();
        let dir = KernelDir::from_kernel(k);
        assert!(compiler_made(&dir));
        // The same kernel.json over other text (one comment line) is no
        // longer the compiler's, and neither is a kernel.json that names
        // another shape over the original text.
        let mut edited = dir.clone();
        edited.bytes.extend_from_slice(b"\n// hand-edited\n");
        assert!(!compiler_made(&edited));
        let mut other = dir.clone();
        other.meta.shape = vec![67, 129, 66];
        assert!(!compiler_made(&other));
    }
}
