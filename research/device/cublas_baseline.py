"""Baselines for the WGSL benchmarks, measured on the same GPU in the same
run: cuBLAS fp32 SGEMM with TF32 off, cuBLAS batched SGEMM, fp32 and fp16
GEMMs of M x 4096 x 4096 (M = 1 to 512), device-to-device
copy bandwidth, and cuBLAS fp16 matrix-vector products (weight traffic).
Prints one JSON object per line."""
import json

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")


def time_ms(fn, reps=50, warmup=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / reps)
    samples.sort()
    return samples[len(samples) // 2]


print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__}))
for name, (b, m, k, n) in {
    "matmul 4096,4096,4096": (1, 4096, 4096, 4096),
    "matmul 384,768,768": (1, 384, 768, 768),
    "matmul 640,768,3072": (1, 640, 768, 3072),
    "batch_matmul 12,384,384,64": (12, 384, 384, 64),
    "batch_matmul 120,64,64,64": (120, 64, 64, 64),
}.items():
    a = torch.randn(b, m, k, device=dev)
    w = torch.randn(b, k, n, device=dev)
    fn = (lambda: torch.mm(a[0], w[0])) if b == 1 else (lambda: torch.bmm(a, w))
    ms = time_ms(fn)
    print(json.dumps({"baseline": "cublas fp32 (tf32 off)", "op": name, "ms": ms, "tflops": 2 * b * m * k * n / ms / 1e9}))

# Prefill and small-M shapes (M x 4096 x 4096): the q4 and split-K goals
# compare against cuBLAS fp32 (TF32 off) and fp16 (tensor cores) here.
for m in [1, 16, 64, 128, 256, 512]:
    for dtype, label in [(torch.float32, "cublas fp32 (tf32 off)"), (torch.float16, "cublas fp16")]:
        a = torch.randn(m, 4096, dtype=dtype, device=dev)
        w = torch.randn(4096, 4096, dtype=dtype, device=dev)
        ms = time_ms(lambda: torch.mm(a, w), reps=100)
        print(json.dumps({"baseline": label, "op": f"matmul {m},4096,4096", "ms": ms, "tflops": 2 * m * 4096 * 4096 / ms / 1e9}))

x = torch.empty(1 << 28, dtype=torch.float32, device=dev)  # 1 GiB
y = torch.empty_like(x)
ms = time_ms(lambda: y.copy_(x), reps=10, warmup=3)
print(json.dumps({"baseline": "device-to-device copy 1 GiB", "ms": ms, "gbps_read_plus_write": 2 * x.numel() * 4 / ms / 1e6}))

for n, k in [(4096, 4096), (9216, 3072), (3072, 8192), (16384, 16384)]:
    wt = torch.randn(n, k, dtype=torch.float16, device=dev)
    v = torch.randn(k, dtype=torch.float16, device=dev)
    ms = time_ms(lambda: torch.mv(wt, v), reps=200)
    print(json.dumps({"baseline": "cublas fp16 matvec", "n": n, "k": k, "ms": ms, "weight_gbps": n * k * 2 / ms / 1e6}))
