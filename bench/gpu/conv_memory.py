"""Where a torchvision CNN's GPU memory goes under fp32 (no TF32) and bf16, with and without
cudnn.benchmark: peak allocated (tensors and convolution workspaces) and peak reserved (what the
caching allocator holds, which NVML sees), per model and batch, after 4 iterations of SGD with momentum.
python3 conv_memory.py -> one JSON line per (model, batch, precision, benchmark)."""
import json, sys, time, torch, torchvision
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
for name, batches in (("resnet50", (64, 256)), ("wide_resnet50_2", (32, 128))):
    for b in batches:
        for prec in ("fp32", "bf16"):
            for bench in (False, True):
                if prec == "bf16" and not bench:
                    continue
                torch.backends.cudnn.benchmark = bench
                torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
                t = time.perf_counter()
                m = getattr(torchvision.models, name)(num_classes=1000).cuda().train()
                opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
                x = torch.randn(b, 3, 224, 224, device="cuda"); y = torch.randint(0, 1000, (b,), device="cuda")
                for _ in range(4):
                    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=prec == "bf16"):
                        loss = torch.nn.functional.cross_entropy(m(x), y)
                    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
                torch.cuda.synchronize()
                print(json.dumps({"model": name, "batch": b, "prec": prec, "benchmark": bench,
                                  "max_alloc_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
                                  "max_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 2),
                                  "s": round(time.perf_counter() - t, 1)}), flush=True)
                del m, opt, x, y, loss
